"""An op a functional Keras model replays (`keras.ops.stop_gradient` on a symbolic tensor in
Keras 3, `tf.stop_gradient` in Keras 2, which becomes an op layer) is told at the user's line that
wrote it, not at the line that called the model (`model.fit`); a stop_gradient a TensorFlow
function makes for itself on a symbolic tensor (`tf.nn.moments`) is TensorFlow's, never a cut
of the user's (GC204). TensorFlow's own gradients judge each verdict (`--verify`, GC003)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import run_command
from tests.cli_runs import invoke

SCRIPTS = Path(__file__).resolve().parent / "scripts" / "functional_ops"


def _line_of(script: Path, text: str) -> int:
    lines = [n for n, line in enumerate(script.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


def _report(name: str) -> dict[str, Any]:
    code, out, err = invoke(run_command, [str(SCRIPTS / name), "--verify", "-v", "-f", "json"])
    assert code == 1, out + err
    report = json.loads(out)
    codes = {f["code"] for f in report["findings"]}
    assert "GC003" in codes and "GC002" not in codes, report["findings"]  # TensorFlow agrees
    return report


def _blocked_at(report: dict[str, Any]) -> dict[str, set[int]]:
    return {
        v["name"]: {b["location"]["line"] for b in v["blockers"] if b["location"]}
        for v in report["variables"]
        if v["status"] == "blocked"
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("keras3_ops_fit.py", "ops.stop_gradient(aux)"),
        ("keras3_ops_eager.py", "ops.stop_gradient(aux)"),
        pytest.param("keras2_ops_fit.py", "tf.stop_gradient(aux)", marks=pytest.mark.libraries),
    ],
)
def test_a_replayed_op_is_told_at_the_line_that_wrote_it(name: str, text: str) -> None:
    script = SCRIPTS / name
    report = _report(name)
    line = _line_of(script, text)
    assert _blocked_at(report) == {"aux/kernel": {line}, "aux/bias": {line}}
    for variable in report["variables"]:
        if variable["status"] == "blocked":
            assert f"at line {line}" in variable["fix"], variable["fix"]


@pytest.mark.libraries
def test_a_stop_gradient_tensorflow_makes_for_itself_is_not_the_users_cut() -> None:
    report = _report("keras2_ops_fit.py")
    partial = [f for f in report["findings"] if f["code"] == "GC204"]
    assert partial == [], partial  # tf.nn.moments stops its mean's gradient by design
