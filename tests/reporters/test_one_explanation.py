"""One explanation per dead variable, rendered by every format: the same cuts behind the
stop_gradients and the same fix in the terminal, Markdown, JSON, SARIF, annotations and DOT."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.explanation import explain
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.findings.rules import RULE_BY_REASON
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import Format, TerminalOptions, render
from tests.reporters.factories import verdict
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[2]
SEED_SCRIPT = "sample_models/faulty_weights_tf1.py"
# The formats that explain a dead variable (the text format is one grep-friendly line per
# finding, its message only).
EXPLAINING = (
    Format.TERMINAL,
    Format.MARKDOWN,
    Format.JSON,
    Format.SARIF,
    Format.GITHUB,
    Format.DOT,
)


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


@pytest.fixture(scope="module")
def seed(repository_checks: RepositoryChecks) -> Report:
    return repository_checks.start(SEED_SCRIPT, "loss").result()


def _plain(report: Report, output_format: Format) -> str:
    """The rendered report as words: each format's own escaping undone, whitespace folded."""
    options = TerminalOptions(width=None)
    text = render(report, output_format, options)
    if output_format is Format.GITHUB:
        text = text.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")
    elif output_format is Format.MARKDOWN:
        text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>])", r"\1", text)
    elif output_format is Format.DOT:
        text = text.replace("\\l", "\n").replace('\\"', '"').replace("\\\\", "\\")
    elif output_format is Format.JSON:
        text = "\n".join(_strings(json.loads(text)))
    elif output_format is Format.SARIF:
        document = json.loads(text)
        text = "\n".join(r["message"]["text"] for run in document["runs"] for r in run["results"])
    return " ".join(text.split())


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _folded(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("output_format", EXPLAINING, ids=lambda f: f.value)
def test_every_format_gives_the_seed_the_same_cuts_and_fix(
    seed: Report, output_format: Format
) -> None:
    (dead,) = seed.dead
    fix = seed.fixes[dead.name]
    words, code = fix.splitlines()
    still_cut = seed.still_cut[dead.name]
    assert "the Cast at line 40 and the BitwiseXor at line 42 would still cut it" in still_cut
    assert "straight-through estimator" in words
    shown = _plain(seed, output_format)
    assert _folded(still_cut) in shown
    assert _folded(words) in shown
    assert _folded(code) in shown
    # No format adds advice of its own: the generic advice per cut is gone from all of them.
    for generic in ("replace the BitwiseXor", "keep weights_i's path in floating point"):
        assert generic not in shown


def _stopped_bias() -> Report:
    """A Keras bias under a tf.stop_gradient alone, built by hand."""
    at = SourceLocation(str(REPO / "model.py"), 7)
    cut = Blocker("dense/StopGradient", "StopGradient", Reason.STOP_GRADIENT, "stops", location=at)
    bias = verdict(
        "dense/bias",
        Status.BLOCKED,
        blockers=(cut,),
        route=(
            PathStep("dense/StopGradient", "StopGradient", location=at, cut=Reason.STOP_GRADIENT),
        ),
        location=SourceLocation(str(REPO / "model.py"), 3),
    )
    kernel = verdict("dense/kernel", Status.OK)
    explained = explain((bias, kernel), SourceLines(), {})
    finding = RULE_BY_REASON[Reason.STOP_GRADIENT].finding(
        name=bias.name,
        op_type=cut.op_type,
        op_name=cut.op,
        detail=cut.message,
        hint=explained.fixes[bias.name],
        variable=bias.name,
        op=cut.op,
        location=at,
    )
    assert finding.severity is Severity.ERROR
    findings: tuple[Finding, ...] = (finding,)
    return Report(
        SourceInfo("model.py", "script", "loss"),
        (bias, kernel),
        findings,
        fixes=explained.fixes,
        still_cut=explained.still_cut,
    )


@pytest.mark.parametrize("output_format", EXPLAINING, ids=lambda f: f.value)
def test_every_format_gives_a_stopped_bias_the_fix_the_terminal_gives(
    output_format: Format,
) -> None:
    report = _stopped_bias()
    fix = report.fixes["dense/bias"]
    assert fix.startswith("remove the tf.stop_gradient at line 7")
    assert report.still_cut == {}
    shown = _plain(report, output_format)
    assert _folded(fix.splitlines()[0]) in shown
    assert "create bias with trainable=False" not in shown
