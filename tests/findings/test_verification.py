"""`--verify`: where gradcheck's verdicts and TensorFlow's own gradients disagree."""

from __future__ import annotations

from gradcheck_cli.analysis.verdicts import Status
from gradcheck_cli.findings.verification import compare
from gradcheck_cli.graph.model import TensorFlowVerdict
from tests.reporters.factories import verdict


def test_only_a_different_dead_or_alive_call_is_a_disagreement() -> None:
    verdicts = (
        verdict("agrees_dead", Status.BLOCKED),
        verdict("agrees_alive", Status.OK),
        verdict("zero", Status.OK),
        verdict("unread", Status.UNUSED),
        verdict("frozen", Status.FROZEN),
        verdict("not_asked", Status.BLOCKED),
    )
    tensorflow = {
        "agrees_dead": TensorFlowVerdict.NONE,
        "agrees_alive": TensorFlowVerdict.GRADIENT,
        "zero": TensorFlowVerdict.ZERO,
        "unread": TensorFlowVerdict.GRADIENT,
        "frozen": TensorFlowVerdict.NONE,
    }
    result = compare(verdicts, tensorflow, None, "tf.GradientTape")
    assert [(d.variable, d.gradcheck, d.tensorflow) for d in result.disagreements] == [
        ("zero", "ok", "zero"),
        ("unread", "unused", "gradient"),
    ]
    assert result.method == "tf.GradientTape" and not result.agrees


def test_no_verdict_from_tensorflow_is_an_error() -> None:
    result = compare((verdict("w", Status.OK),), None, None, "tf.GradientTape")
    assert result.error == "TensorFlow gave no verdict" and not result.agrees
    result = compare((verdict("w", Status.OK),), None, "ValueError: no", "tf.GradientTape")
    assert result.error == "ValueError: no"
