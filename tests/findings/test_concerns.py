"""Warnings that are not dead variables, on traced functions; TensorFlow confirms the claims."""

from __future__ import annotations

import inspect

import pytest

from gradcheck_cli import check_function
from gradcheck_cli.findings.report import Report


def _line_of(function: object, marker: str) -> int:
    lines, start = inspect.getsourcelines(function)  # type: ignore[arg-type]
    return start + next(i for i, line in enumerate(lines) if marker in line)


def _codes_at(report: Report, code: str) -> list[int]:
    return sorted(f.location.line for f in report.findings if f.code == code and f.location)


def _gradients(loss, variables):  # type: ignore[no-untyped-def]
    import tensorflow as tf

    with tf.GradientTape() as tape:
        value = loss()
    return [
        None if g is None else tf.convert_to_tensor(g).numpy()
        for g in tape.gradient(value, variables)
    ]


@pytest.fixture(scope="module")
def tf():  # type: ignore[no-untyped-def]
    import tensorflow

    return tensorflow


def test_stop_gradient_whose_result_is_unused(tf) -> None:  # type: ignore[no-untyped-def]
    w = tf.Variable([1.0, 2.0], name="w_unused_stop")

    @tf.function
    def loss():  # type: ignore[no-untyped-def]
        stopped = tf.stop_gradient(w * 3.0)  # marker: unused
        del stopped
        return tf.reduce_sum(w * w)

    report = check_function(loss, variables=[w])
    assert _codes_at(report, "GC201") == [_line_of(loss.python_function, "marker: unused")]


@pytest.mark.parametrize("redundant", [True, False])
def test_stop_gradient_that_changes_nothing(tf, redundant: bool) -> None:  # type: ignore[no-untyped-def]
    w = tf.Variable([1.5, 2.5], name="w_redundant")
    v = tf.Variable([0.5, 0.25], name="v_redundant")
    x = tf.constant([3.0, 4.0])

    def body(stop):  # type: ignore[no-untyped-def]
        def loss():  # type: ignore[no-untyped-def]
            as_int = tf.cast(tf.cast(w * 10.0, tf.int32), tf.float32)
            cut = stop(as_int) if redundant else stop(x)  # marker: stop
            return tf.reduce_sum(cut * v + w * v)

        return loss

    traced = tf.function(body(tf.stop_gradient))
    report = check_function(traced, variables=[w, v])
    code = "GC202" if redundant else "GC203"
    assert _codes_at(report, code) == [_line_of(body, "marker: stop")]
    # TensorFlow's gradients are the same with the stop_gradient replaced by an identity.
    with_stop = _gradients(body(tf.stop_gradient), [w, v])
    without = _gradients(body(tf.identity), [w, v])
    for a, b in zip(with_stop, without):
        assert (a is None) == (b is None) and (a is None or (a == b).all())


def test_variable_cut_in_one_branch_and_on_some_paths(tf) -> None:  # type: ignore[no-untyped-def]
    gate = tf.Variable([0.5, 0.5], name="gate_branch")

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def loss(x):  # type: ignore[no-untyped-def]
        return tf.reduce_sum(
            tf.cond(  # marker: cond
                tf.reduce_sum(x) > 0.0,
                lambda: x * gate,
                lambda: tf.stop_gradient(gate) * x,
            )
        )

    quiet = check_function(loss, variables=[gate])
    assert [f.variable for f in quiet.findings if f.code == "GC205"] == ["gate_branch"]
    assert not [f for f in quiet.findings if f.code == "GC204"]
    verbose = check_function(loss, variables=[gate], all_cuts=True)
    assert [f.variable for f in verbose.findings if f.code == "GC204"] == ["gate_branch"]


def test_stop_gradient_on_a_loop_variable_the_body_overwrites(tf) -> None:  # type: ignore[no-untyped-def]
    # `v` enters the loop as `b`, which the first run of the body overwrites with an integer
    # round trip of `a`: what reaches the stop_gradient carries no gradient either way.
    w = tf.Variable([1.5, 2.5], name="w_overwritten")
    v = tf.Variable([0.5, 0.25], name="v_overwritten")

    def body(stop):  # type: ignore[no-untyped-def]
        def loss():  # type: ignore[no-untyped-def]
            def step(i, a, b):  # type: ignore[no-untyped-def]
                return i + 1, a * 2.0, tf.cast(tf.cast(a * 10.0, tf.int32), tf.float32)

            _, a, b = tf.while_loop(lambda i, a, b: i < 3, step, (0, w * 1.0, v * 1.0))
            return tf.reduce_sum(a * v + stop(b))  # marker: stop

        return loss

    report = check_function(tf.function(body(tf.stop_gradient)), variables=[w, v])
    assert _codes_at(report, "GC202") == [_line_of(body, "marker: stop")]
    with_stop = _gradients(body(tf.stop_gradient), [w, v])
    without = _gradients(body(tf.identity), [w, v])
    for a, b in zip(with_stop, without):
        assert (a is None) == (b is None) and (a is None or (a == b).all())
