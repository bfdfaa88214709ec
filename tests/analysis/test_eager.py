"""Statuses from TensorFlow's eager gradients, for a loss that cannot be traced (no TensorFlow)."""

from __future__ import annotations

from gradcheck_cli.analysis.eager import eager_verdicts
from gradcheck_cli.analysis.verdicts import Status, Unreached
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import SourceLocation, TensorFlowVerdict, Variable

LEFT_AT = SourceLocation("model.py", 12)


def _variable(name: str, trainable: bool = True) -> Variable:
    return Variable(name, trainable, "float32", (2,), source=None, path=f"m.{name}")


def test_each_tensorflow_verdict_gives_its_status() -> None:
    variables = [
        _variable("flows"),
        _variable("zero"),
        _variable("none"),
        _variable("unread"),
        _variable("unknown"),
        _variable("frozen", trainable=False),
    ]
    gradients = {
        "flows": TensorFlowVerdict.GRADIENT,
        "zero": TensorFlowVerdict.ZERO,
        "none": TensorFlowVerdict.NONE,
        "unread": TensorFlowVerdict.UNREAD,
    }
    verdicts = eager_verdicts(variables, gradients, LEFT_AT, "called .numpy()")
    assert [v.status for v in verdicts] == [
        Status.OK,
        Status.BLOCKED,
        Status.BLOCKED,
        Status.UNUSED,
        Status.BLOCKED,
        Status.FROZEN,
    ]
    assert verdicts[3].unreached is Unreached.NEVER_READ


def test_a_blocked_variable_is_cut_where_the_value_leaves_tensorflow() -> None:
    (verdict,) = eager_verdicts(
        [_variable("w")], {"w": TensorFlowVerdict.NONE}, LEFT_AT, "called .numpy()"
    )
    (blocker,) = verdict.blockers
    assert blocker.reason is Reason.LEFT_TENSORFLOW
    assert blocker.location == LEFT_AT
    assert "called .numpy()" in blocker.message


def test_a_verdict_reads_its_fields_from_its_variable() -> None:
    variable = _variable("w")
    (verdict,) = eager_verdicts([variable], {"w": TensorFlowVerdict.GRADIENT}, None, "")
    assert verdict.variable is variable
    assert (verdict.name, verdict.path, verdict.trainable) == ("w", "m.w", True)
    assert (verdict.dtype, verdict.shape, verdict.location) == ("float32", (2,), None)
