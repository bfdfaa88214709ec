"""A gradient_override_map keyed by the wrong op type is told as the bug: the fix names the key
the cut op needs. TensorFlow judges: with the key corrected the weight trains, and the scale
too once its tf.stop_gradient is removed as well."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradcheck_cli import check
from gradcheck_cli.findings.report import Report
from tests import forked_python

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tests" / "scripts" / "override_wrong_key.py"
PROBE = "tests.findings.gradient_probe"
WRONG = '{"Floor": "Identity"}'
RIGHT = '{"Round": "Identity"}'


@pytest.fixture(scope="module")
def report() -> Report:
    return check(str(SCRIPT), "loss")


def _line(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def test_the_fix_names_the_key_the_cut_op_needs(report: Report) -> None:
    assert {v.name for v in report.dead} == {"w", "scale"}
    where = f"the gradient_override_map at line {_line('with graph.gradient_override_map')} keys {{"
    for name in ("w", "scale"):
        fix = report.fixes[name]
        assert fix.startswith(where), fix
        assert f'key it by "Round" ({RIGHT})' in fix
    assert "remove the tf.stop_gradient" not in report.fixes["w"]
    assert f"remove the tf.stop_gradient at line {_line('tf.round(')}" in report.fixes["scale"]


def _probe(cases: list[list[str]], tmp_path: Path) -> list[str]:
    out = tmp_path / "verdicts.json"
    forked_python.run(["-m", PROBE, json.dumps(cases), str(out)])
    verdicts: list[str] = json.loads(out.read_text())
    return verdicts


def test_tensorflow_trains_what_the_fix_says(tmp_path: Path) -> None:
    text = SCRIPT.read_text()
    assert WRONG in text
    keyed = tmp_path / "keyed.py"
    keyed.write_text(text.replace(WRONG, RIGHT))
    both = tmp_path / "keyed_unstopped.py"
    both.write_text(text.replace(WRONG, RIGHT).replace("tf.stop_gradient(scale)", "scale"))
    cases = [
        [str(SCRIPT), "w"],
        [str(SCRIPT), "scale"],
        [str(keyed), "w"],
        [str(keyed), "scale"],
        [str(both), "scale"],
    ]
    assert _probe(cases, tmp_path) == ["none", "none", "gradient", "none", "gradient"]
