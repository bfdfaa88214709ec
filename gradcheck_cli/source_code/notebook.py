"""A Jupyter notebook's code cells as plain Python, run in order as one program."""

from __future__ import annotations

import ast
import linecache
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.source_code.files import bounded_text

MAX_NOTEBOOK_BYTES = 256 * 2**20
"""The largest notebook gradcheck reads: outputs (images) included, notebooks are megabytes."""

# Cell magics whose body is ordinary Python that the magic only times or captures.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture"})
# Line magics that run the statement after them: `%time model.fit(x, y)`.
_PYTHON_LINE_MAGICS = frozenset({"time", "timeit"})
_LINE_MAGIC = re.compile(r"%(?P<name>\w+)\s*(?P<rest>.*)")
# %timeit's own options before the statement: `%timeit -n 10 -r 3 step()`.
_TIMEIT_OPTIONS = re.compile(r"(?:(?:-[nrp]\s*\d+|-[tcqo])\s+)*")
# IPython's help requests: `?tf.function`, `model.fit??`.
_HELP = re.compile(r"\?{1,2}[\w.]+|[\w.]+\?{1,2}")
_CELL_FILENAME = re.compile(r"(?P<path>.+\.ipynb)#cell(?P<index>\d+)")
_SHOWN_LENGTH = 60


@dataclass(frozen=True)
class NotebookCell:
    """A code cell: its 1-based position among all the notebook's cells, and the Python it runs."""

    index: int
    filename: str
    source: str


def cell_filename(notebook: Path, index: int) -> str:
    """The filename cell `index` of `notebook` runs under: `/abs/train.ipynb#cell3`."""
    return f"{notebook}#cell{index}"


def notebook_cell(filename: str) -> tuple[str, int] | None:
    """(notebook path, cell index) for a cell's filename; None for any other file."""
    match = _CELL_FILENAME.fullmatch(filename)
    return None if match is None else (match["path"], int(match["index"]))


def read_notebook(path: Path) -> tuple[list[NotebookCell], list[str]]:
    """The code cells as Python, magics and shell escapes left out, and a note for each left out.

    A left-out line becomes `pass` at its indentation (a blank line at top level), so every
    line keeps its number; a cell whose cell magic runs another language is left out whole.
    """
    notebook = _read(path)
    absolute = path.resolve()
    cells: list[NotebookCell] = []
    notes: list[str] = []
    for index, cell in enumerate(notebook.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source")
        if not isinstance(source, str):
            raise _invalid(path, f"code cell {index} has no source")
        python = _python_source(source, index, notes)
        if python is not None:
            cells.append(NotebookCell(index, cell_filename(absolute, index), python))
    return cells, notes


def run_cells(cells: Sequence[NotebookCell], namespace: dict[str, Any]) -> None:
    """Run the cells in order in one namespace, each under its own filename; errors propagate."""
    for cell in cells:
        _remember_lines(cell)
        # dont_inherit: gradcheck's own `from __future__` imports must not change the user's code.
        code = compile(cell.source, cell.filename, "exec", dont_inherit=True)
        exec(code, namespace)


def _read(path: Path) -> Any:
    import nbformat

    text = bounded_text(str(path), MAX_NOTEBOOK_BYTES)
    if text is None:
        raise GradcheckError(
            f"cannot read notebook {display_path(path)}: not a regular file of at most "
            f"{MAX_NOTEBOOK_BYTES >> 20} MiB"
        )
    try:
        with warnings.catch_warnings():
            # A cell without an id or a field the schema does not know: Jupyter opens such
            # notebooks too, so they are read, without nbformat's warnings or logged errors.
            warnings.simplefilter("ignore")
            return nbformat.reads(text, as_version=4, capture_validation_error={})
    except RecursionError:
        raise _invalid(path, "its JSON is nested too deep") from None
    except (ValueError, nbformat.ValidationError) as error:
        lines = str(error).strip().splitlines()
        raise _invalid(path, lines[0] if lines else type(error).__name__) from None
    except (AttributeError, KeyError, TypeError):
        raise _invalid(path, "its JSON does not have a notebook's layout") from None


def _invalid(path: Path, reason: str) -> GradcheckError:
    return GradcheckError(f"{display_path(path)}: not a valid Jupyter notebook: {reason}")


def _python_source(source: str, index: int, notes: list[str]) -> str | None:
    lines = source.split("\n")
    first = next((number for number, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        words = lines[first].strip()[2:].split()
        magic = words[0] if words else ""
        if magic not in _PYTHON_CELL_MAGICS:
            notes.append(
                f"cell {index}: skipped the whole cell: its %%{magic} cell magic does not run "
                "it as Python"
            )
            return None
        notes.append(
            f"cell {index} line {first + 1}: ran the cell's code without its %%{magic} cell magic"
        )
        lines[first] = ""
    if _parses("\n".join(lines)):
        return "\n".join(lines)
    for number, line in enumerate(lines, start=1):
        replaced = _without_magic(line)
        if replaced is not None:
            lines[number - 1], what = replaced
            notes.append(f"cell {index} line {number}: {what}")
    return "\n".join(lines)


def _parses(source: str) -> bool:
    # Plain Python is left alone: a `% b)` continuation line or a `!` inside a string is code.
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _without_magic(line: str) -> tuple[str, str] | None:
    """The line's Python replacement and what was done, when the line is IPython syntax."""
    stripped = line.strip()
    indent = line[: len(line) - len(line.lstrip())]
    filler = f"{indent}pass" if indent else ""
    if stripped.startswith("!"):
        return filler, f"skipped the shell command `{_shown(stripped)}`"
    if stripped.startswith("%"):
        magic = _LINE_MAGIC.fullmatch(stripped)
        if magic is not None and magic["name"] in _PYTHON_LINE_MAGICS:
            statement = _TIMEIT_OPTIONS.sub("", magic["rest"], count=1)
            if statement:
                return (
                    f"{indent}{statement}",
                    f"ran `{_shown(statement)}` without its %{magic['name']} line magic",
                )
        return filler, f"skipped the line magic `{_shown(stripped)}`"
    if _HELP.fullmatch(stripped):
        return filler, f"skipped the help request `{_shown(stripped)}`"
    return None


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_LENGTH else text[: _SHOWN_LENGTH - 3] + "..."


def _remember_lines(cell: NotebookCell) -> None:
    # Tracebacks, TensorFlow's op tracebacks and autograph's inspect.getsource read a file's
    # lines through linecache; a cell is no file, so its lines are put there. An entry whose
    # modification time is None survives linecache.checkcache.
    lines = [line + "\n" for line in cell.source.split("\n")]
    linecache.cache[cell.filename] = (len(cell.source), None, lines, cell.filename)
