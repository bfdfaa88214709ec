"""Inline suppressions and the baseline in a real git repository, as a team wires gradcheck into
CI: `# gradcheck: ignore[CODE]` on a variable's line or its cut's, a bare `# gradcheck: ignore`,
an ignore comment that matches nothing (GC008), and a baseline whose accepted variables SARIF
marks `unchanged` and the new ones `new`. One check writes SARIF to a file and annotations to
stdout (`--also`). TensorFlow says which variables are dead; the suppressions only decide which
of them fail the run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gradcheck_cli.cli import command
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.run import ExitCode
from gradcheck_cli.source_code.ignore_comments import ignore_comments
from tests.cli_runs import Ran, invoke
from tests.oracle import dead_in_script, dead_names
from tests.reporters.test_formats import sarif_schema  # noqa: F401  (the SARIF 2.1.0 schema)

MODEL = """import tensorflow as tf

w = tf.Variable(1.0, name="w")  # gradcheck: ignore[GC101]
scale = tf.Variable(2.0, name="scale")  # gradcheck: ignore[GC101]
bias = tf.Variable(0.5, name="bias")
spare = tf.Variable(0.5, name="spare")  # gradcheck: ignore
x = tf.ones([3])


def loss():
    cut = tf.stop_gradient(scale * x)
    rounded = tf.cast(tf.cast(bias, tf.int32), tf.float32)  # gradcheck: ignore[GC102]
    return tf.reduce_sum(w * x + cut + rounded)
"""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository holding the model and a `[tool.gradcheck]` table."""
    root = tmp_path_factory.mktemp("repository")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "model.py").write_text(MODEL)
    (root / "pyproject.toml").write_text('[tool.gradcheck]\nloss = "loss"\n')
    return root


@pytest.fixture(scope="module")
def tensorflow_dead(repository: Path) -> set[str]:
    return dead_names(dead_in_script(str(repository / "model.py"), "loss"))


def _gradcheck(folder: Path, *args: str) -> Ran:
    """`gradcheck ARGS` in `folder`, as a CI step runs it (its command line, in this process:
    the check itself runs in gradcheck's own worker)."""
    previous = Path.cwd()
    os.chdir(folder)
    try:
        return invoke(command, args)
    finally:
        os.chdir(previous)


def _results(log: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {
        (result["ruleId"], _variable(result)): result
        for run in log["runs"]
        for result in run["results"]
    }


def _variable(result: dict[str, Any]) -> str | None:
    names = [
        place["name"]
        for location in result["locations"]
        for place in location.get("logicalLocations", [])
        if place["kind"] == "variable"
    ]
    return names[0] if names else None


def test_ignore_comments_suppress_in_every_format_and_an_unused_one_is_told(
    repository: Path,
    tensorflow_dead: set[str],
    sarif_schema: dict[str, Any],  # noqa: F811
) -> None:
    assert tensorflow_dead == {"scale", "bias", "spare"}
    ran = _gradcheck(repository, "model.py", "-f", "github", "--also", "sarif:out.sarif")
    assert ran.returncode == ExitCode.CLEAN, ran.stdout + ran.stderr  # a warning fails nothing
    # Annotations: no error left; the stale comment on `w` (which trains) is a warning.
    assert "::error" not in ran.stdout
    assert "::warning file=model.py,line=3,title=GC008 unused-suppression" in ran.stdout
    log = json.loads((repository / "out.sarif").read_text())
    jsonschema.validate(log, sarif_schema)
    results = _results(log)
    suppressed = {
        variable: result["suppressions"]
        for (_, variable), result in results.items()
        if "suppressions" in result
    }
    assert set(suppressed) == tensorflow_dead
    assert {s[0]["kind"] for s in suppressed.values()} == {"inSource"}
    assert "model.py:12" in suppressed["bias"][0]["justification"]  # the cut's line
    assert results[("GC008", None)]["level"] == "warning"
    # The same check in JSON: the suppressed findings marked, and counted.
    document = json.loads(_gradcheck(repository, "model.py", "-f", "json").stdout)
    assert document["summary"]["dead"] == 0 and document["summary"]["suppressed"] == 3
    marked = {f["variable"] for f in document["findings"] if "suppressed" in f}
    assert marked == tensorflow_dead
    # The terminal says how many it suppressed; --fail-on warning fails on the stale comment.
    ran = _gradcheck(repository, "model.py", "--fail-on", "warning")
    assert ran.returncode == ExitCode.DEAD_VARIABLES, ran.stdout + ran.stderr
    assert "3 suppressed" in ran.stdout and "scale     blocked (suppressed)" in ran.stdout


def test_without_its_comments_the_same_model_fails(
    repository: Path, tmp_path: Path, tensorflow_dead: set[str]
) -> None:
    plain = tmp_path / "model.py"
    plain.write_text("\n".join(line.split("  #")[0] for line in MODEL.splitlines()) + "\n")
    ran = _gradcheck(tmp_path, "model.py", "--loss", "loss", "-f", "json")
    assert ran.returncode == ExitCode.DEAD_VARIABLES
    assert json.loads(ran.stdout)["summary"]["dead"] == len(tensorflow_dead)


def test_a_baseline_marks_accepted_results_unchanged_and_new_ones_new(
    tmp_path: Path,
    sarif_schema: dict[str, Any],  # noqa: F811
) -> None:
    root = tmp_path / "repository"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    plain = "\n".join(line.split("  #")[0] for line in MODEL.splitlines()) + "\n"
    (root / "model.py").write_text(plain)
    (root / "pyproject.toml").write_text(
        '[tool.gradcheck]\nloss = "loss"\nbaseline = "gradcheck-baseline.json"\n'
    )
    ran = _gradcheck(root, "model.py", "--write-baseline", "gradcheck-baseline.json")
    assert ran.returncode == ExitCode.CLEAN, ran.stderr
    assert ran.stderr.strip().endswith("3 dead variables in 1 model"), ran.stderr
    # A new dead variable: `w` cut too.
    (root / "model.py").write_text(plain.replace("w * x", "tf.stop_gradient(w) * x"))
    ran = _gradcheck(root, "model.py", "-f", "sarif")
    assert ran.returncode == ExitCode.DEAD_VARIABLES, ran.stderr
    log = json.loads(ran.stdout)
    jsonschema.validate(log, sarif_schema)
    states = {
        variable: (result["baselineState"], result.get("suppressions"))
        for (code, variable), result in _results(log).items()
        if variable is not None and code != "GC007"
    }
    assert states["w"] == ("new", None)
    for name in ("scale", "bias", "spare"):
        state, suppressions = states[name]
        assert state == "unchanged" and suppressions[0]["kind"] == "external", name
        assert suppressions[0]["justification"] == "the baseline"
    text = _gradcheck(root, "model.py").stdout
    assert "allowed by the baseline" in text and "3 dead but allowed" in text


def test_only_real_comments_are_ignore_comments() -> None:
    source = (
        'text = "# gradcheck: ignore"\n'
        "a = 1  # gradcheck: ignore[gc101, GC2]\n"
        "b = 2  # gradcheck: ignore[E501]\n"
        "c = 3  # gradcheck:ignore\n"
        "d = 4  # gradcheck: ignore[GC101\n"
    )
    found = {comment.line: comment.codes for comment in ignore_comments("m.py", source)}
    assert found == {2: ("GC101", "GC2"), 3: ("-",), 4: (), 5: ("-",)}


def test_the_pytest_assertion_honours_the_comments(
    repository: Path, tensorflow_dead: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gradcheck_cli

    monkeypatch.chdir(repository)
    report = gradcheck_cli.assert_no_dead_variables("model.py", loss="loss")
    assert set(report.suppressed) == tensorflow_dead and report.dead == ()


def test_a_variable_cut_two_ways_is_suppressed_only_when_both_codes_are() -> None:
    from gradcheck_cli.findings.finding import Severity
    from gradcheck_cli.findings.rules import RULES
    from gradcheck_cli.findings.suppressions import apply_ignore_comments
    from gradcheck_cli.graph.model import SourceLocation

    def cut(code: str, line: int) -> Finding:
        rule = RULES[code]
        return Finding(
            code,
            rule.name,
            Severity.ERROR,
            "v is cut",
            variable="v",
            location=SourceLocation("m.py", line),
        )

    findings = [cut("GC101", 3), cut("GC102", 4)]
    created = {"v": [SourceLocation("m.py", 1)]}
    one = ignore_comments("m.py", "v = 1  # gradcheck: ignore[GC101]\n")
    kept, suppressed = apply_ignore_comments(findings, one, created)
    assert suppressed == {} and [f.severity for f in kept] == [Severity.INFO, Severity.ERROR]
    both = ignore_comments("m.py", "v = 1  # gradcheck: ignore[GC101, GC102]\n")
    kept, suppressed = apply_ignore_comments(findings, both, created)
    assert set(suppressed) == {"v"} and {f.severity for f in kept} == {Severity.INFO}
