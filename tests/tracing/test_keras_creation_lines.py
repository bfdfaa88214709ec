"""Every Keras weight is created at the line that constructed its own layer: functional,
Sequential and subclassed models, layers from a helper, in plain and in run mode."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from gradcheck_cli import check, check_script_run
from gradcheck_cli.findings.report import Report
from tests.golden import assert_matches_golden, fixed_machine, golden_terminal

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests/scripts/keras_creation_lines.py"
LAYERS = {
    "hidden",
    "logits",
    "first",
    "second",
    "block_0",
    "block_1",
    "head",
    "scale",
    "tower",
}


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    # One after the other: the second worker forks from the warm launcher.
    plain = check(str(SCRIPT), "loss")
    (request,) = check_script_run(str(SCRIPT))
    return {"plain": plain, "run": request}


def _built_on(line: str) -> set[str]:
    found = re.search(r"# builds (.*)$", line)
    return set(found.group(1).split(", ")) if found else set()


@pytest.mark.parametrize("mode", ["plain", "run"])
def test_each_weight_is_created_at_its_own_layers_line(
    mode: str, reports: dict[str, Report]
) -> None:
    lines = SCRIPT.read_text().splitlines()
    report = reports[mode]
    layers_seen = set()
    for verdict in report.variables:
        layer = verdict.name.split("/")[-2]
        layers_seen.add(layer)
        location = verdict.location
        assert location is not None, f"{mode}: {verdict.name} has no creation line"
        assert Path(location.file).resolve() == SCRIPT, location
        line = lines[location.line - 1]
        assert layer in _built_on(line), f"{mode}: {verdict.name} created at {line.strip()!r}"
    assert layers_seen == LAYERS
    assert not report.dead


def test_why_a_model_or_a_layer_tells_each_weight_at_its_layers_line(
    reports: dict[str, Report],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The functional model by the script's variable (`functional`), the others by their Keras
    name scope (`sequential`, `tower`), as `--why NAME` tells them."""
    fixed_machine(monkeypatch)
    # Weights that tracing creates come in TensorFlow's capture order, which varies by run.
    report = reports["plain"]
    report = replace(report, variables=tuple(sorted(report.variables, key=lambda v: v.name)))
    text = "".join(
        golden_terminal(report, width=100, focus=name)
        for name in ("functional", "sequential", "tower")
    )
    assert_matches_golden(text, "keras_creation_lines.txt", request)
