"""Values outside TensorFlow: a loss that leaves it, and one that captured a value read before
tracing; `--verify` (TensorFlow's own tape) agrees with every verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gradcheck_cli.cli import ExitCode, command
from tests.cli_runs import cli_result

SCRIPTS = Path(__file__).parent / "scripts"


def _check(script: Path) -> tuple[int, dict[str, Any]]:
    result = cli_result(command, [str(script), "--loss", "loss", "--verify", "--format", "json"])
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    codes = {f["code"] for f in report["findings"]}
    assert "GC003" in codes and "GC002" not in codes, report["findings"]  # TensorFlow agrees
    return result.exit_code, report


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["status"] for v in report["variables"]}


def _line(script: Path, finding: dict[str, Any]) -> str:
    return script.read_text().splitlines()[finding["location"]["line"] - 1]


def test_numpy_on_a_variable_is_judged_eagerly_at_its_line() -> None:
    script = SCRIPTS / "eager_variable_numpy_loss.py"
    code, report = _check(script)
    assert code == ExitCode.DEAD_VARIABLES
    assert _statuses(report) == {"scale": "blocked", "offset": "ok"}
    (left,) = [f for f in report["findings"] if f["code"] == "GC109"]
    assert left["severity"] == "error"
    assert "scale.numpy()" in _line(script, left)


def test_a_sampled_action_leaves_tensorflow_harmlessly() -> None:
    code, report = _check(SCRIPTS / "eager_sampled_action_loss.py")
    assert code == ExitCode.CLEAN
    assert _statuses(report) == {"policy": "ok", "critic": "ok"}
    assert not [f for f in report["findings"] if f["severity"] == "error"]
    (left,) = [f for f in report["findings"] if f["code"] == "GC109"]
    assert left["severity"] == "info" and "no variable loses its gradient" in left["message"]


def test_a_value_read_before_tracing_is_frozen_into_the_graph() -> None:
    script = SCRIPTS / "frozen_at_import.py"
    code, report = _check(script)
    assert code == ExitCode.DEAD_VARIABLES
    assert _statuses(report) == {"weights": "unused", "bias": "ok", "spare": "unused"}
    unused = {f["variable"]: f["message"] for f in report["findings"] if f["code"] == "GC108"}
    read_line = 1 + script.read_text().splitlines().index("frozen = tf.identity(weights) * 2.0")
    assert f"read at frozen_at_import.py:{read_line}" in unused["weights"]
    assert "frozen into the graph as a constant" in unused["weights"]
    assert unused["spare"].endswith("the loss function never reads it")  # read, but not captured


def test_python_max_on_unnamed_variables_blames_the_one_it_does_not_pick() -> None:
    # --verify: TensorFlow's tape agrees, variable by variable, though both are "Variable".
    script = SCRIPTS / "eager_python_max_loss.py"
    code, report = _check(script)
    assert code == ExitCode.DEAD_VARIABLES
    assert _statuses(report) == {"Variable": "blocked", "Variable_1": "ok"}
    (left,) = [f for f in report["findings"] if f["code"] == "GC109"]
    assert "max(low * x, high * x)" in _line(script, left)
    (low,) = [v for v in report["variables"] if v["status"] == "blocked"]
    assert low["path"] is None or "low" in low["path"]
    assert "tf.maximum" in low["fix"]


def test_a_keras_weights_own_numpy_in_an_eager_loop_is_the_cut_at_its_line() -> None:
    from gradcheck_cli.cli import run_command
    from tests.cli_runs import invoke

    script = SCRIPTS / "eager_run" / "keras_weight_numpy.py"
    code, out, err = invoke(run_command, [str(script), "--verify", "-f", "json"])
    assert code == ExitCode.DEAD_VARIABLES, out + err
    report = json.loads(out)
    codes = {f["code"] for f in report["findings"]}
    assert "GC003" in codes and "GC002" not in codes, report["findings"]  # TensorFlow agrees
    (scale,) = [v for v in report["variables"] if v["status"] != "ok"]
    assert scale["name"] == "net/scale" and scale["status"] == "blocked"
    (cut,) = scale["blockers"]
    assert "model.scale.numpy()" in _line(script, cut)
    assert "compile(loss" not in scale["fix"] and ".numpy()" in scale["fix"]
