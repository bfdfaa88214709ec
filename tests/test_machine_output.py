"""JSON and SARIF on the command line: the shape follows the number of MODEL arguments, and a
model that cannot be checked keeps its place, so a CI uploader always gets a document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gradcheck_cli.cli import ExitCode, command, run_command
from tests.cli_runs import Ran, cli_result, invoke
from tests.reporters.test_formats import sarif_schema  # noqa: F401  (the SARIF 2.1.0 schema)


def _run(*args: str | Path) -> Ran:
    return invoke(command, args)


def _errors(err: str) -> list[str]:
    return [line.removeprefix("gradcheck: error: ") for line in err.splitlines()]


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with inputs that fail before TensorFlow is needed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()  # a folder that is no SavedModel
    return tmp_path


# -- JSON -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "source"),
    [
        ("missing.py", {"path": "missing.py", "kind": "script"}),
        ("missing.keras", {"path": "missing.keras", "kind": "keras"}),
        ("missing", {"path": "missing"}),
        ("notes", {"path": "notes"}),
    ],
)
def test_one_model_that_fails_is_one_error_object(
    inputs: Path, model: str, source: dict[str, str]
) -> None:
    code, out, err = _run(model, "-f", "json")
    assert code == ExitCode.ERROR
    (error,) = _errors(err)
    assert json.loads(out) == {"schema": "gradcheck/1", "source": source, "error": error}


def test_one_model_is_an_object_and_two_a_list(saved: Path) -> None:
    code, out, _ = _run(saved, "--loss", "loss", "-f", "json")
    one = json.loads(out)
    assert code == ExitCode.DEAD_VARIABLES and one["source"]["path"] == str(saved)
    code, out, _ = _run(saved, saved, "--loss", "loss", "-f", "json")
    assert code == ExitCode.DEAD_VARIABLES and json.loads(out) == [one, one]


def test_several_models_keep_their_order_and_their_failures(
    saved: Path,
    inputs: Path,
) -> None:
    code, out, err = _run(saved, "missing.py", saved, "notes", "--loss", "loss", "-f", "json")
    assert code == ExitCode.ERROR
    entries = json.loads(out)
    assert [entry["source"]["path"] for entry in entries] == [
        str(saved),
        "missing.py",
        str(saved),
        "notes",
    ]
    missing, notes = _errors(err)
    assert [entry.get("error") for entry in entries] == [None, missing, None, notes]
    assert [sorted(entry) for entry in entries[1::2]] == [["error", "schema", "source"]] * 2
    assert entries[0] == entries[2] and "variables" in entries[0]


def test_two_models_where_one_fails_are_a_list_of_two(
    saved: Path,
    inputs: Path,
) -> None:
    code, out, err = _run("missing", saved, "--loss", "loss", "-f", "json")
    assert code == ExitCode.ERROR
    failed, checked = json.loads(out)
    (error,) = _errors(err)
    assert failed == {"schema": "gradcheck/1", "source": {"path": "missing"}, "error": error}
    assert checked["source"]["path"] == str(saved) and "error" not in checked


@pytest.mark.parametrize("script", ["missing.py", "notes"])
def test_a_script_run_that_fails_is_one_error_object(inputs: Path, script: str) -> None:
    result = cli_result(run_command, [script, "-f", "json"])
    assert result.exit_code == ExitCode.ERROR
    (error,) = _errors(result.stderr)
    assert json.loads(result.stdout) == {
        "schema": "gradcheck/1",
        "source": {"path": script, "kind": "run"},
        "error": error,
    }


@pytest.mark.parametrize("output_format", ["json", "sarif"])
def test_when_every_model_fails_the_document_is_still_written(
    inputs: Path, output_format: str
) -> None:
    target = inputs / f"report.{output_format}"
    code, out, err = _run("missing.py", "notes", "-f", output_format, "-o", target)
    assert (code, out) == (ExitCode.ERROR, "")
    assert len(_errors(err)) == 2
    document = json.loads(target.read_text())
    code, stdout_document, _ = _run("missing.py", "notes", "-f", output_format)
    assert code == ExitCode.ERROR and json.loads(stdout_document) == document
    if output_format == "json":
        assert [entry["error"] for entry in document] == _errors(err)
    else:
        assert [run["results"] for run in document["runs"]] == [[], []]


def test_formats_for_people_write_nothing_when_every_model_fails(inputs: Path) -> None:
    target = inputs / "report.txt"
    for output_format in ("terminal", "text", "markdown", "dot"):
        code, out, err = _run("missing.py", "-f", output_format, "-o", target)
        assert (code, out, len(_errors(err))) == (ExitCode.ERROR, "", 1)
        assert not target.exists()


# -- SARIF ----------------------------------------------------------------------------------------


def _sarif(schema: dict[str, Any], *args: str | Path) -> tuple[int, dict[str, Any], str]:
    code, out, err = _run(*args, "-f", "sarif")
    log = json.loads(out)
    jsonschema.validate(log, schema)
    return code, log, err


def test_sarif_of_a_failed_model_is_a_valid_failed_run(
    sarif_schema: dict[str, Any],  # noqa: F811
    inputs: Path,
) -> None:
    code, log, err = _sarif(sarif_schema, "notes")
    assert code == ExitCode.ERROR
    (run,) = log["runs"]
    assert run["results"] == []
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert [notification["message"]["text"]] == _errors(err)


def test_sarif_of_a_saved_model_without_debug_info_points_at_saved_model_pb(
    sarif_schema: dict[str, Any],  # noqa: F811
    saved: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not (saved / "debug").exists()
    monkeypatch.chdir(saved.parent)
    code, log, _ = _sarif(sarif_schema, saved.name, "--loss", "loss")
    assert code == ExitCode.DEAD_VARIABLES
    (run,) = log["runs"]
    assert run["invocations"] == [{"executionSuccessful": True}]
    codes = {result["ruleId"] for result in run["results"]}
    assert {"GC005"} < codes, "no debug info, and a dead variable"
    for result in run["results"]:
        (location,) = result["locations"]
        assert location["physicalLocation"] == {
            "artifactLocation": {"uri": f"{saved.name}/saved_model.pb", "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 1},
        }
        assert location["logicalLocations"]
    dead = [r for r in run["results"] if r["level"] == "error"]
    assert dead
    for result in dead:
        logical = result["locations"][0]["logicalLocations"]
        assert ("variable", "scale") in [(item["kind"], item["name"]) for item in logical]


def test_sarif_of_models_where_one_fails_has_results_and_a_notification(
    sarif_schema: dict[str, Any],  # noqa: F811
    saved: Path,
    inputs: Path,
) -> None:
    code, log, err = _sarif(sarif_schema, saved, "missing.py", "--loss", "loss")
    assert code == ExitCode.ERROR
    checked, failed = log["runs"]
    assert checked["invocations"][0]["executionSuccessful"] is True and checked["results"]
    assert failed["invocations"][0]["executionSuccessful"] is False and failed["results"] == []
    (notification,) = failed["invocations"][0]["toolExecutionNotifications"]
    assert [notification["message"]["text"]] == _errors(err)


# -- GitHub ---------------------------------------------------------------------------------------


def test_github_names_each_model_that_could_not_be_checked(
    saved: Path,
    inputs: Path,
) -> None:
    code, out, err = _run("missing.py", saved, "notes", "--loss", "loss", "-f", "github")
    assert code == ExitCode.ERROR
    lines = out.splitlines()
    missing, notes = _errors(err)
    assert lines[0] == f"::error title=gradcheck could not check missing.py::{missing}"
    assert lines[-1] == f"::error title=gradcheck could not check notes::{notes}"
    assert any("scale" in line for line in lines[1:-1])


def test_also_refuses_a_bad_target_and_a_file_written_twice(inputs: Path) -> None:
    for args in (["--also", "sarif"], ["--also", "yaml:out.yaml"]):
        code, out, err = _run("missing.py", *args)
        assert code == ExitCode.ERROR and out == "" and "FORMAT:FILE" in err, err
    code, out, err = _run("missing.py", "-f", "json", "-o", "a.json", "--also", "sarif:a.json")
    assert (code, out) == (ExitCode.ERROR, "") and len(_errors(err)) == 1
    assert "same file" in err and not (inputs / "a.json").exists()


def test_also_writes_a_second_format_from_the_same_check(saved: Path, inputs: Path) -> None:
    code, out, _ = _run(saved, "--loss", "loss", "-f", "json", "--also", "sarif:report.sarif")
    assert code == ExitCode.DEAD_VARIABLES
    sarif = json.loads((inputs / "report.sarif").read_text())
    (run,) = sarif["runs"]
    dead = {v["name"] for v in json.loads(out)["variables"] if v["status"] != "ok"}
    assert dead == {"scale"} and any("scale" in r["message"]["text"] for r in run["results"])
