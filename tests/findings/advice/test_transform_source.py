"""Where a transform's frames part from the next op's, the line of an op in a lambda, and the
straight-through estimator's shape: on hand-written frames, source and graphs, without
TensorFlow."""

from __future__ import annotations

from pathlib import Path

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.verdicts import VariableVerdict
from gradcheck_cli.findings.advice.transform_source import _Frame, _parting, estimator_inside
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.op_expressions import line_inside_lambda
from tests.graph_factory import BodyFactory, program

TOP = _Frame("model.py", 60, "loss")
CALL = _Frame("model.py", 47, "__call__")


def test_a_transform_inside_a_call_parts_at_the_call() -> None:
    quantize = _Frame("model.py", 22, "quantize")
    assert _parting([TOP, CALL, quantize], [TOP, CALL]) == (CALL, "quantize")


def test_a_transform_on_its_own_line_parts_there() -> None:
    own, later = _Frame("model.py", 46, "layer"), _Frame("model.py", 54, "layer")
    assert _parting([TOP, own], [TOP, later]) == (own, None)
    helper = _Frame("model.py", 9, "helper")
    assert _parting([TOP, own, helper], [TOP, later]) == (own, "helper")


def test_a_transform_on_the_next_ops_line_is_its_own_op() -> None:
    assert _parting([TOP, CALL], [TOP, CALL]) == (CALL, None)


def test_an_op_in_a_cond_lambda_gets_its_own_line(tmp_path: Path) -> None:
    script = tmp_path / "model.py"
    script.write_text(
        "def loss(x, t):\n"
        "    return tf.cond(\n"
        "        tf.reduce_sum(x) > 0.0,\n"
        "        lambda: tf.cast(\n"
        "            x > t, tf.float32),\n"
        "        lambda: x,\n"
        "    )\n"
    )
    outer = SourceLocation(str(script), 2, "loss")
    inner = SourceLocation(str(script), 2, "loss", callers=(outer,))
    assert line_inside_lambda(inner, "Greater").line == 5
    assert line_inside_lambda(inner, "Cast").line == 4
    assert line_inside_lambda(inner, "Round").line == 2  # none in the lambdas: unchanged
    assert line_inside_lambda(outer, "Greater").line == 2  # no caller on the same line


def _estimator(*, adds_back: bool) -> VariableVerdict:
    """The codebook's verdict in `z + tf.stop_gradient(nearest - z)`, or, when not `adds_back`,
    in `other + tf.stop_gradient(nearest - z)` (no straight-through estimator)."""
    f = BodyFactory("loss")
    x = f.op("x", "Placeholder")
    encoder, codebook = f.arg("encoder/kernel"), f.arg("codebook")
    z = f.op("z", "MatMul", x, encoder)
    nearest = f.op("nearest", "MatMul", f.op("codes", "Placeholder"), codebook)
    stopped = f.op("StopGradient", "StopGradient", f.op("delta", "Sub", nearest, z))
    base = z if adds_back else f.op("other", "Placeholder")
    total = f.op("quantized", "AddV2", base, stopped)
    loss = f.op("loss", "Sum", f.op("square", "Square", total))
    verdicts = analyse(program(f.body(loss), loss)).verdicts
    return next(v for v in verdicts if v.name == "codebook")


def test_only_a_real_straight_through_estimator_is_told_as_one() -> None:
    assert estimator_inside(_estimator(adds_back=True)) is not None
    assert estimator_inside(_estimator(adds_back=False)) is None


def test_an_op_in_a_statement_over_several_lines_is_on_its_own_line(tmp_path: Path) -> None:
    # Autograph maps a statement's ops to its first line; the op's one expression names its own.
    script = tmp_path / "model.py"
    script.write_text(
        "def loss():\n"
        "    total = tf.reduce_sum(\n"
        "        b * 2.0\n"
        "        + tf.cast(\n"
        "            tf.argmax(w),\n"
        "            tf.float32,\n"
        "        )\n"
        "    )\n"
    )
    at = SourceLocation(str(script), 2, "loss")
    assert line_inside_lambda(at, "ArgMax").line == 5
    assert line_inside_lambda(at, "Cast").line == 4
    assert line_inside_lambda(at, "Round").line == 2  # none in the statement: unchanged
    assert line_inside_lambda(SourceLocation(str(script), 5, "loss"), "ArgMax").line == 5
