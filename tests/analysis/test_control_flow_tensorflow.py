"""Where the control-flow walkers once disagreed, TensorFlow's own gradients decide."""

from __future__ import annotations

from typing import Any

import pytest

from gradcheck_cli import check_function
from gradcheck_cli.analysis.verdicts import Status
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.report import Report


@pytest.fixture(scope="module")
def tf() -> Any:
    import tensorflow

    return tensorflow


def _gradients(tf: Any, loss: Any, variables: list[Any]) -> list[Any]:
    with tf.GradientTape() as tape:
        value = loss()
    return [
        None if g is None else tf.convert_to_tensor(g).numpy()
        for g in tape.gradient(value, variables)
    ]


def _dead(gradient: Any) -> bool:
    return gradient is None or not gradient.any()


def _verdict(report: Report, name: str) -> Any:
    return next(v for v in report.variables if v.name == name)


def test_a_loop_variable_that_reaches_the_condition_a_run_later_is_blocked_by_it(tf: Any) -> None:
    # `a` never reaches the returned `x` by value: it becomes `t` after one run of the body,
    # and `t` decides how often the body runs.
    w = tf.Variable(1.0, name="w_trip_count")
    v = tf.Variable(2.0, name="v_trip_count")

    @tf.function
    def loss() -> Any:
        def cond(i: Any, a: Any, t: Any, x: Any) -> Any:
            return tf.logical_and(i < 3, t < 100.0)

        def body(i: Any, a: Any, t: Any, x: Any) -> Any:
            return i + 1, a, a, x * 2.0

        start = (tf.constant(0), w * 1.0, tf.constant(0.0), v * 1.0)
        return tf.while_loop(cond, body, start)[3]

    report = check_function(loss, variables=[w, v], verify=True)
    assert report.verification is not None and not report.verification.disagreements
    verdict = _verdict(report, "w_trip_count")
    assert verdict.status is Status.BLOCKED
    assert [b.reason for b in verdict.blockers] == [Reason.INDEX_OR_SHAPE_INPUT]
    assert _verdict(report, "v_trip_count").status is Status.OK
    w_gradient, v_gradient = _gradients(tf, loss, [w, v])
    assert _dead(w_gradient) and not _dead(v_gradient)


def test_a_call_output_a_variable_does_not_reach_names_none_of_its_cuts(tf: Any) -> None:
    w = tf.Variable([1.5, 2.5], name="w_first_output")
    v = tf.Variable([0.5, 0.25], name="v_second_output")

    @tf.function
    def inner(a: Any, b: Any) -> Any:
        return tf.cast(tf.cast(a * 10.0, tf.int32), tf.float32), b * 2.0

    def objective(stop: Any) -> Any:
        def loss() -> Any:
            first, second = inner(w * 1.0, v * 1.0)
            return tf.reduce_sum(first + stop(second))

        return loss

    report = check_function(tf.function(objective(tf.stop_gradient)), variables=[w, v])
    w_verdict, v_verdict = _verdict(report, w.name[:-2]), _verdict(report, v.name[:-2])
    assert w_verdict.status is Status.BLOCKED
    assert [b.reason for b in w_verdict.blockers] == [Reason.INTEGER_DTYPE]
    assert v_verdict.status is Status.BLOCKED
    assert [b.reason for b in v_verdict.blockers] == [Reason.STOP_GRADIENT]
    # Without the stop_gradient on the second output, w is just as dead and v lives.
    w_gradient, v_gradient = _gradients(tf, objective(tf.identity), [w, v])
    assert _dead(w_gradient) and not _dead(v_gradient)


def test_a_function_whose_only_path_is_an_integer_output_still_connects_its_variable(
    tf: Any,
) -> None:
    # The gradient pass loses the path inside `inner` to a dtype alone (its ret is an
    # integer, no cut rule fires): the structural pass must walk `inner` itself, not take
    # the gradient pass's summary, or `w` would look unused instead of blocked.
    w = tf.Variable([1.5, 2.5, 0.5], name="w_through_argmax")
    v = tf.Variable([0.5, 0.25], name="v_alongside")

    @tf.function
    def inner(a: Any, b: Any) -> Any:
        return tf.argmax(a), b * 2.0

    @tf.function
    def loss() -> Any:
        index, scaled = inner(w * 1.0, v * 1.0)
        return tf.cast(index, tf.float32) + tf.reduce_sum(scaled)

    report = check_function(loss, variables=[w, v], verify=True)
    assert report.verification is not None and not report.verification.disagreements
    assert _verdict(report, "w_through_argmax").status is Status.BLOCKED
    assert _verdict(report, "v_alongside").status is Status.OK
    w_gradient, v_gradient = _gradients(tf, loss, [w, v])
    assert _dead(w_gradient) and not _dead(v_gradient)
