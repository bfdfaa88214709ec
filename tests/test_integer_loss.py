"""A loss whose value is not a float (an int32 rank from tf.argsort, a tf.cast to int32, a bool,
a string) is a dead-variable finding, not a refusal: TensorFlow's gradient of such a tensor is
None for every variable (tape.gradient returns None, it does not raise), so every variable is
dead, cut at the op where its value became one, at that line. In the plain script form, a
SavedModel and `gradcheck run` (a tf.function step and an eager one), judged by TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import ExitCode, run_command
from tests import forked_python
from tests.cli_runs import Ran, gradcheck_json, invoke
from tests.oracle import dead_in_savedmodel, dead_in_script, dead_names

SCRIPTS = Path(__file__).parent / "scripts" / "integer_loss"
LOSSES = SCRIPTS / "rank_losses.py"

# Per loss of rank_losses.py: the op where the value stops being a float, the code on its
# line, and the loss's own dtype when it is not a float.
CUT_AT = {
    "rank_loss": ("TopKV2", "ranks = tf.argsort(scores(), axis=-1)", "int32"),
    "float_rank_loss": ("TopKV2", "ranks = tf.argsort(scores(), axis=-1)", None),
    "cast_loss": ("Cast", "return tf.cast(error, tf.int32)", "int32"),
    "bool_loss": ("Greater", "return tf.reduce_any(scores() > 0.0)", "bool"),
    "string_loss": ("AsString", "return tf.strings.as_string(", "string"),
}
RANK_FIX = ("pairwise ranking loss", "soft rank")


@pytest.fixture(scope="module")
def plain() -> dict[str, tuple[Ran, dict[str, str]]]:
    """gradcheck's JSON report and TensorFlow's verdicts for each loss of rank_losses.py."""
    return {
        loss: (gradcheck_json(str(LOSSES), "--loss", loss), dead_in_script(str(LOSSES), loss))
        for loss in CUT_AT
    }


def _line(script: Path, code: str, after: int = 0) -> int:
    lines = script.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if n > after and code in line)


def _cut_where_it_became_a_non_float(
    report: dict[str, Any], script: Path, op_type: str, line: int
) -> None:
    for variable in report["variables"]:
        assert variable["status"] == "blocked", variable
        (blocker,) = variable["blockers"]
        assert blocker["op_type"] == op_type, blocker
        assert blocker["location"]["line"] == line, blocker
        assert Path(blocker["location"]["file"]).resolve() == script.resolve()


@pytest.mark.parametrize("loss", CUT_AT)
def test_a_non_float_loss_is_every_variable_dead_where_its_value_became_one(
    loss: str, plain: dict[str, tuple[Ran, dict[str, str]]]
) -> None:
    run, tensorflow = plain[loss]
    assert run.returncode == ExitCode.DEAD_VARIABLES, run.stderr
    report = json.loads(run.stdout)
    # TensorFlow: every variable's gradient is None.
    assert set(tensorflow.values()) == {"none"}
    dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
    assert dead == dead_names(tensorflow) == {"scorer", "bias"}
    op_type, code, dtype = CUT_AT[loss]
    start = _line(LOSSES, f"def {loss}():")
    _cut_where_it_became_a_non_float(report, LOSSES, op_type, _line(LOSSES, code, start))
    (whole,) = [f for f in report["findings"] if f["code"] == "GC110"]
    if dtype is None:
        assert "tensor" not in whole["message"]
    else:
        assert f" {dtype} tensor" in whole["message"]
        assert "returns None" in whole["message"] or "return None" in whole["message"]


def test_the_fixes_are_a_rank_surrogate_and_a_float_loss(
    plain: dict[str, tuple[Ran, dict[str, str]]],
) -> None:
    fixes = {
        loss: {v["fix"] for v in json.loads(run.stdout)["variables"]}
        for loss, (run, _) in plain.items()
    }
    for loss in ("rank_loss", "float_rank_loss"):
        for fix in fixes[loss]:
            assert all(words in fix for words in RANK_FIX), fix
            argsort = _line(LOSSES, CUT_AT[loss][1], _line(LOSSES, f"def {loss}():"))
            assert f"at line {argsort}" in fix
    (cast,) = fixes["cast_loss"]
    assert "makes the loss an int32 tensor" in cast and "return the loss as a float" in cast
    assert "straight-through" not in cast


def test_a_saved_model_whose_loss_is_a_rank(tmp_path: Path) -> None:
    saved = tmp_path / "ranker"
    script = SCRIPTS / "save_ranker.py"
    run_as_main = (
        "import runpy, sys; sys.argv[:] = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    forked_python.run(["-c", run_as_main, str(script), str(saved)])
    run = gradcheck_json(str(saved), "--loss", "loss")
    assert run.returncode == ExitCode.DEAD_VARIABLES, run.stderr
    report = json.loads(run.stdout)
    assert {v["name"] for v in report["variables"]} == dead_names(
        dead_in_savedmodel(str(saved), "loss")
    )
    _cut_where_it_became_a_non_float(report, script, "TopKV2", _line(script, "ranks = tf.argsort("))
    assert all(words in report["variables"][0]["fix"] for words in RANK_FIX)


@pytest.mark.parametrize("name", ["rank_step.py", "rank_eager.py"])
def test_a_run_whose_loss_is_a_rank(name: str, tmp_path: Path) -> None:
    script = SCRIPTS / name
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == ExitCode.DEAD_VARIABLES, err
    report = json.loads(out)
    # TensorFlow's own run of the script: the same request, None for each variable.
    answer = tmp_path / "oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(answer), str(script)])
    (request,) = json.loads(answer.read_text())["requests"]
    assert report["source"]["request"]["location"]["line"] == request["location"]["line"]
    dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
    assert dead == set(request["none"]) == set(request["variables"])
    _cut_where_it_became_a_non_float(report, script, "TopKV2", _line(script, "tf.argsort("))
    assert "eager step: TensorFlow's verdict only" not in report["source"]["loss"]
    assert all(words in report["variables"][0]["fix"] for words in RANK_FIX)
