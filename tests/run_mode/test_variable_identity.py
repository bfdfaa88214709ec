"""Each variable keeps its identity from recording to report: seven tf.Variables that TensorFlow
all calls `Variable`, five given to the step's request, in an eager loop, a tf.function step, a
notebook, `watch()` and the plain form (`--loss loss`).

TensorFlow is the judge: tests/run_oracle.py runs the script and says which requested variable
got None, and which line created it; tests/oracle.py asks a tape for the plain form's loss. Both
tell variables that share a name apart by the order the script created them (`Variable`,
`Variable_1`, ...), and so must every form and every format of gradcheck.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli import check, check_script_run
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters import Format, TerminalOptions, render
from tests import forked_python, oracle

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "identity"
SCRIPT = SCRIPTS / "unnamed_variables.py"
TWO_REQUESTS = SCRIPTS / "two_requests.py"
DEAD = ("blocked", "unused")
READ_NOT_REQUESTED = "GC213"
NEVER_REQUESTED = "GC207"

# Each variable as its own tuple: (name, status, creation line) from Report objects; what the
# in-process form writes from the user's own process.
WATCHED = """
import json, runpy, sys
import gradcheck_cli
from gradcheck_cli.reporters import Format, render

out, script = sys.argv[1:]
try:
    with gradcheck_cli.watch():
        runpy.run_path(script, run_name="__main__")
    reports = []
except gradcheck_cli.DeadVariablesError as error:
    reports = error.reports
lines = [[v.location.line if v.location else None for v in r.variables] for r in reports]
with open(out, "w") as file:
    json.dump({"json": [json.loads(render(r, Format.JSON)) for r in reports], "lines": lines}, file)
"""


def _notebook(script: Path, path: Path) -> Path:
    """The script as a notebook, a cell per `# %%` part."""
    parts = script.read_text().split("# %%\n")[1:]
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"cell-{number}",
            "metadata": {},
            "outputs": [],
            "source": part.strip("\n").splitlines(keepends=True),
        }
        for number, part in enumerate(parts, 1)
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook, indent=1))
    return path


@pytest.fixture(scope="module")
def marker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The file the script writes once it has trained: gradcheck stops it before."""
    path = tmp_path_factory.mktemp("identity") / "trained.marker"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADCHECK_TEST_MARKER", str(path))
        yield path


@pytest.fixture(scope="module")
def tensorflow(marker: Path) -> dict[str, Any]:
    """TensorFlow's run of the script, eager and in a tf.function step: each request's
    variables told apart, with None or not, and every variable the script created."""
    answers = {}
    for form, arguments in (("eager", []), ("function", ["function"])):
        out = marker.parent / f"{form}.oracle.json"
        forked_python.run(["-m", "tests.run_oracle", str(out), str(SCRIPT), *arguments])
        answers[form] = json.loads(out.read_text())
        assert answers[form]["error"] is None, answers[form]["error"]
    marker.unlink(missing_ok=True)
    return answers


@pytest.fixture(scope="module")
def plain_verdicts() -> dict[str, str]:
    """TensorFlow's tape on the loss alone, for every trainable variable of the script."""
    return oracle.dead_in_script(str(SCRIPT), "loss")


@pytest.fixture(scope="module")
def run_reports(marker: Path) -> dict[str, list[Report]]:
    """gradcheck's reports of the script's request, in each form `gradcheck run` checks."""
    notebook = _notebook(SCRIPT, marker.parent / "unnamed_variables.ipynb")
    return {
        "eager": check_script_run(SCRIPT, timeout=300),
        "function": check_script_run(SCRIPT, ["function"], timeout=300),
        "notebook": check_script_run(notebook, timeout=300),
    }


@pytest.fixture(scope="module")
def watched(marker: Path) -> dict[str, Any]:
    """`watch()` in the user's own process, around the eager loop."""
    out = marker.parent / "watched.json"
    forked_python.run(["-c", WATCHED, str(out), str(SCRIPT)])
    return dict(json.loads(out.read_text()))


def _request(answer: dict[str, Any]) -> list[dict[str, Any]]:
    (request,) = answer["requests"]
    return list(request["sources"])


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    names = [v["name"] for v in report["variables"]]
    assert len(names) == len(set(names)), names  # every name once
    return {v["name"]: v["status"] for v in report["variables"]}


def _named_in(code: str, report: dict[str, Any], names: set[str]) -> set[str]:
    """Which of `names` a finding `code` of the report names, each as a whole name."""
    messages = [f["message"] for f in report["findings"] if f["code"] == code]
    return {n for n in names if any(re.search(rf"(?<![\w/]){n}(?![\w/])", m) for m in messages)}


def _not_requested(answer: dict[str, Any]) -> set[str]:
    requested = {source["name"] for source in _request(answer)}
    return {v["name"] for v in answer["created"] if v["trainable"]} - requested


def _judged(report: dict[str, Any], answer: dict[str, Any], plain: dict[str, str]) -> None:
    """The report lists each variable the request asked for once, under the name TensorFlow's
    run tells it by, dead exactly when TensorFlow gives it None. Its warnings name, by the
    same names, the variables no request lists and none of the table's: GC213 the one the loss
    reads and would train (TensorFlow's tape on the loss gives it a gradient), GC207 the other."""
    sources = _request(answer)
    statuses = _statuses(report)
    assert sorted(statuses) == sorted(source["name"] for source in sources)
    dead = {name for name, status in statuses.items() if status in DEAD}
    assert dead == {source["name"] for source in sources if source["none"]}
    everyone = {v["name"] for v in answer["created"]} | set(statuses)
    read = _named_in(READ_NOT_REQUESTED, report, everyone)
    never = _named_in(NEVER_REQUESTED, report, everyone)
    not_requested = _not_requested(answer)
    trains = {name for name, verdict in plain.items() if verdict == "gradient"}
    assert read == not_requested & trains
    assert never == not_requested - trains


@pytest.mark.parametrize("form", ["eager", "function", "notebook"])
def test_every_requested_variable_once_by_its_name_with_tensorflows_verdict(
    form: str,
    run_reports: dict[str, list[Report]],
    tensorflow: dict[str, Any],
    plain_verdicts: dict[str, str],
    marker: Path,
) -> None:
    (report,) = run_reports[form]
    answer = tensorflow["function" if form == "function" else "eager"]
    _judged(json.loads(render(report, Format.JSON)), answer, plain_verdicts)
    assert not marker.exists()


@pytest.mark.parametrize("form", ["eager", "function"])
def test_each_variable_keeps_the_line_that_created_it(
    form: str, run_reports: dict[str, list[Report]], tensorflow: dict[str, Any]
) -> None:
    (report,) = run_reports[form]
    created = {source["name"]: source["line"] for source in _request(tensorflow[form])}
    lines = {v.name: v.location.line if v.location else None for v in report.variables}
    assert lines == created


def test_watch_tells_the_same_variables_apart(
    watched: dict[str, Any], tensorflow: dict[str, Any], plain_verdicts: dict[str, str]
) -> None:
    (report,) = watched["json"]
    _judged(report, tensorflow["eager"], plain_verdicts)
    created = {source["name"]: source["line"] for source in _request(tensorflow["eager"])}
    names = [v["name"] for v in report["variables"]]
    assert dict(zip(names, watched["lines"][0], strict=True)) == created


def test_the_plain_form_names_them_as_the_run_does(
    plain_verdicts: dict[str, str], tensorflow: dict[str, Any]
) -> None:
    checked = check(SCRIPT, loss="loss")
    statuses = _statuses(json.loads(render(checked, Format.JSON)))
    assert set(statuses) == set(plain_verdicts)
    dead = {name for name, status in statuses.items() if status in DEAD}
    assert dead == oracle.dead_names(plain_verdicts)
    created = {v["name"]: v["line"] for v in tensorflow["eager"]["created"] if v["trainable"]}
    lines = {v.name: v.location.line if v.location else None for v in checked.variables}
    assert lines == created


@pytest.mark.parametrize("form", ["eager", "function", "notebook"])
def test_every_format_names_the_variables_alike(
    form: str, run_reports: dict[str, list[Report]]
) -> None:
    (report,) = run_reports[form]
    document = json.loads(render(report, Format.JSON))
    statuses = _statuses(document)
    findings = {f["code"]: f for f in document["findings"]}

    # Verbose: GC207 is an info, listed with -v.
    terminal = render(report, Format.TERMINAL, TerminalOptions(width=None, verbose=True))
    table = terminal[terminal.index("\nvariable ") :].strip().split("\n\n")[0].splitlines()[1:]
    assert dict(row.split()[:2] for row in table) == statuses

    markdown = render(report, Format.MARKDOWN).replace("\\_", "_")
    rows = re.findall(r"^\| `([^`]+)` \| (\w+) \|", markdown, flags=re.MULTILINE)
    assert sorted(rows) == sorted((n, s) for n, s in statuses.items() if s in DEAD)

    sarif = json.loads(render(report, Format.SARIF))
    results = sarif["runs"][0]["results"]
    named = sorted(
        place["name"]
        for result in results
        for place in result["locations"][0]["logicalLocations"]
        if place["kind"] == "variable"
    )
    assert named == sorted(f["variable"] for f in document["findings"] if f["variable"])
    for code in (NEVER_REQUESTED, READ_NOT_REQUESTED):
        if code in findings:
            message = findings[code]["message"]
            assert f"{code}: {message}" in terminal
            assert message in markdown
            (result,) = [r for r in results if r["ruleId"] == code]
            assert result["message"]["text"].startswith(message)


def test_two_requests_tell_their_variables_apart_alike(marker: Path) -> None:
    """Each request judged on its own variables, named as in the other request's report and
    as TensorFlow's run tells them apart; the generator's cut bias is dead (exit 1)."""
    out = marker.parent / "two_requests.oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(TWO_REQUESTS)])
    marker.unlink()
    answer = json.loads(out.read_text())
    reports = check_script_run(TWO_REQUESTS, timeout=300)
    assert len(reports) == len(answer["requests"]) == 2
    for report, request in zip(reports, answer["requests"], strict=True):
        statuses = _statuses(json.loads(render(report, Format.JSON)))
        assert sorted(statuses) == sorted(source["name"] for source in request["sources"])
        dead = {name for name, status in statuses.items() if status in DEAD}
        assert dead == {source["name"] for source in request["sources"] if source["none"]}
    assert any(report.dead for report in reports)
    assert not marker.exists()


def test_a_run_names_each_variable_once_by_the_order_of_creation() -> None:
    """Whichever request describes them first, variables that share a name are numbered by
    the order the script created them; one created before gradcheck watched comes after."""
    import tensorflow as tf

    from gradcheck_cli.run_mode.capture import Capture

    earlier = tf.Variable(0.0)
    capture = Capture(deliver=lambda _: None)
    capture.track_variables()  # as `gradcheck run` and `watch()` record the script's variables
    try:
        variables = [tf.Variable(float(number)) for number in range(3)]
    finally:
        capture.uninstall()
    created = capture.created
    names = [created.describe(variable)[1].name for variable in reversed(variables)]
    assert names == ["Variable_2", "Variable_1", "Variable"]
    assert created.describe(earlier)[1].name == "Variable_3"
    assert created.describe(variables[1])[1].name == "Variable_1"  # once named, always
