"""Intended cuts on hand-built graphs: what feeds each stop_gradient, the straight-through
estimator, and which dead variables are told as intended (no TensorFlow)."""

from __future__ import annotations

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.verdicts import Analysis
from gradcheck_cli.findings.intent import judge_intent
from gradcheck_cli.findings.names import common_scope
from gradcheck_cli.findings.source import SourceLines
from tests.graph_factory import BodyFactory, program


def _distillation(*, student_in_teacher: bool = False, with_student: bool = True) -> Analysis:
    """loss = (student(x) - stop_gradient(teacher(x)))^2 with a two-layer teacher; optionally
    the teacher reads the student's output (a live variable upstream of the cut)."""
    f = BodyFactory("loss")
    x = f.op("x", "Placeholder")
    student = f.arg("student/dense/kernel")
    first, second = f.arg("teacher/dense/kernel"), f.arg("teacher/dense_1/kernel")
    guess = f.op("student/MatMul", "MatMul", x, student)
    hidden = f.op("teacher/MatMul", "MatMul", guess if student_in_teacher else x, first)
    logits = f.op("teacher/MatMul_1", "MatMul", hidden, second)
    target = f.op("StopGradient", "StopGradient", logits)
    error = f.op("sub", "Sub", guess, target) if with_student else target
    loss = f.op("loss", "Sum", f.op("square", "Square", error))
    return analyse(program(f.body(loss), loss))


def _vq_vae() -> Analysis:
    """quantized = z + stop_gradient(nearest - z): the codebook is inside nearest."""
    f = BodyFactory("loss")
    x = f.op("x", "Placeholder")
    encoder, codebook = f.arg("encoder/kernel"), f.arg("codebook")
    z = f.op("z", "MatMul", x, encoder)
    codes = f.op("codes", "Placeholder")
    nearest = f.op("nearest", "MatMul", codes, codebook)
    stopped = f.op("StopGradient", "StopGradient", f.op("delta", "Sub", nearest, z))
    quantized = f.op("quantized", "AddV2", z, stopped)
    loss = f.op("loss", "Sum", f.op("square", "Square", quantized))
    return analyse(program(f.body(loss), loss))


def test_the_analysis_names_what_feeds_each_stop_gradient() -> None:
    (shape,) = _distillation().stop_gradients.values()
    assert shape.upstream == ("teacher/dense/kernel", "teacher/dense_1/kernel")
    assert not shape.straight_through
    (shape,) = _vq_vae().stop_gradients.values()
    assert shape.upstream == ("encoder/kernel", "codebook") and shape.straight_through
    assert shape.passed_to == ("encoder/kernel",)


def test_a_teacher_wholly_under_one_stop_gradient_is_intended() -> None:
    intent = judge_intent(_distillation(), SourceLines())
    assert set(intent.intended) == {"teacher/dense/kernel", "teacher/dense_1/kernel"}
    assert {f.code for found in intent.findings.values() for f in found} == {"GC209"}
    assert len(set(intent.fixes.values())) == 1
    assert 'allow-dead = ["teacher/*"]' in intent.fixes["teacher/dense/kernel"]


def test_a_stop_gradient_with_a_live_variable_upstream_is_not_intended() -> None:
    assert not judge_intent(_distillation(student_in_teacher=True), SourceLines()).intended


def test_a_layer_of_the_trained_network_is_not_intended() -> None:
    """model/kept(x) + stop_gradient(model/cut(x)): one network, not a teacher beside it."""
    f = BodyFactory("loss")
    x = f.op("x", "Placeholder")
    kept, cut = f.arg("model/kept/kernel"), f.arg("model/cut/kernel")
    stopped = f.op("StopGradient", "StopGradient", f.op("cut/MatMul", "MatMul", x, cut))
    total = f.op("add", "AddV2", f.op("kept/MatMul", "MatMul", x, kept), stopped)
    loss = f.op("loss", "Sum", total)
    assert not judge_intent(analyse(program(f.body(loss), loss)), SourceLines()).intended


def test_a_loss_that_trains_nothing_is_not_intended() -> None:
    assert not judge_intent(_distillation(with_student=False), SourceLines()).intended


def test_a_codebook_behind_the_straight_through_estimator_stays_an_error() -> None:
    intent = judge_intent(_vq_vae(), SourceLines())
    assert not intent.intended
    (finding,) = intent.findings["codebook"]
    assert finding.code == "GC112" and finding.severity.value == "error"
    assert "needs a loss term of its own" in intent.fixes["codebook"]
    assert "soft-argmax" not in intent.fixes["codebook"]


def test_common_scope() -> None:
    assert common_scope(["teacher/a/kernel", "teacher/b/bias"]) == "teacher"
    assert common_scope(["teacher/a/kernel", "teacher/a/bias"]) == "teacher/a"
    assert common_scope(["dense/kernel", "dense_1/kernel"]) is None
    assert common_scope(["codebook"]) is None


def _paths(analysis: Analysis, paths: dict[str, str]) -> Analysis:
    """The analysis with Keras attribute paths on its variables, as a script gives them."""
    for verdict in analysis.verdicts:
        if verdict.name in paths:
            verdict.variable.path = paths[verdict.name]
    return analysis


def _unscoped_distillation() -> Analysis:
    """A teacher whose layers have no name scope of their own (keras.applications names its
    layers `conv1_conv`...): the Python object holding them tells the network."""
    f = BodyFactory("loss")
    x = f.op("x", "Placeholder")
    student = f.arg("dense/kernel")
    first, second = f.arg("conv1_conv/kernel"), f.arg("predictions/kernel")
    guess = f.op("student/MatMul", "MatMul", x, student)
    hidden = f.op("resnet/MatMul", "MatMul", x, first)
    target = f.op("StopGradient", "StopGradient", f.op("resnet/MatMul_1", "MatMul", hidden, second))
    loss = f.op("loss", "Sum", f.op("square", "Square", f.op("sub", "Sub", guess, target)))
    return analyse(program(f.body(loss), loss))


def test_a_teacher_without_a_name_scope_is_told_by_the_object_holding_it() -> None:
    analysis = _paths(
        _unscoped_distillation(),
        {
            "dense/kernel": "student.layers[1].kernel",
            "conv1_conv/kernel": "teacher.layers[2].kernel",
            "predictions/kernel": "teacher.layers[9].kernel",
        },
    )
    intent = judge_intent(analysis, SourceLines())
    assert set(intent.intended) == {"conv1_conv/kernel", "predictions/kernel"}
    assert 'allow-dead = ["teacher.*"]' in intent.fixes["conv1_conv/kernel"]
    assert "`teacher.trainable = False`" in intent.fixes["conv1_conv/kernel"]


def test_one_layer_of_the_trained_model_without_a_name_scope_is_not_intended() -> None:
    """`model.layers[2]` and `model.layers[9]` under tf.stop_gradient while `model.layers[1]`
    trains: layers of the trained model, not a network of their own."""
    analysis = _paths(
        _unscoped_distillation(),
        {
            "dense/kernel": "model.layers[1].kernel",
            "conv1_conv/kernel": "model.layers[2].kernel",
            "predictions/kernel": "model.layers[9].kernel",
        },
    )
    assert judge_intent(analysis, SourceLines()).intended == {}
