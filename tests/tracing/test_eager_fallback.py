"""A loss whose value leaves TensorFlow is judged by TensorFlow's own tape, run eagerly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import TensorFlowVerdict
from gradcheck_cli.tracing.eager_fallback import eager_fallback
from gradcheck_cli.tracing.function_tracing import concrete_function
from tests.tf_oracle_inprocess import dead_names, tf_verdicts

HERE = Path(__file__)


def _trace_error(function: Any) -> Exception:
    with pytest.raises(Exception) as raised:
        concrete_function(function, "loss", HERE)
    return raised.value


def test_the_tape_judges_a_loss_that_calls_numpy() -> None:
    import numpy as np
    import tensorflow as tf

    through_numpy = tf.Variable([1.0, 2.0], name="through_numpy")
    kept = tf.Variable([0.5], name="kept")
    never_read = tf.Variable([3.0], name="never_read")
    frozen = tf.Variable([4.0], name="frozen", trainable=False)

    def loss() -> Any:
        mean = np.mean((through_numpy * 2.0 + kept).numpy())
        return tf.constant(mean) + tf.reduce_sum(kept) + tf.reduce_sum(frozen)

    error = _trace_error(loss)
    candidates = [through_numpy, kept, never_read, frozen]
    result = eager_fallback(loss, "loss", HERE, candidates, {}, {}, error, verify=True)
    assert [v.name for v in result.variables] == ["through_numpy", "kept", "never_read", "frozen"]
    assert [v.trainable for v in result.variables] == [True, True, True, False]
    assert result.gradients == {
        "through_numpy": TensorFlowVerdict.NONE,
        "kept": TensorFlowVerdict.GRADIENT,
        "never_read": TensorFlowVerdict.UNREAD,
    }
    oracle = tf_verdicts(loss, [through_numpy, kept, never_read])
    assert {n for n, v in result.gradients.items() if v.dead} == dead_names(oracle)
    assert result.left_at is not None and result.left_at.file == str(HERE)
    assert "numpy" in HERE.read_text().splitlines()[result.left_at.line - 1]
    assert result.tensorflow is not None and result.tensorflow.verdicts == result.gradients


def test_no_verification_unless_asked() -> None:
    import tensorflow as tf

    weight = tf.Variable(1.0, name="weight")

    def loss() -> Any:
        return tf.constant(float(weight * 2.0))

    result = eager_fallback(loss, "loss", HERE, [weight], {}, {}, _trace_error(loss), False)
    assert result.gradients == {"weight": TensorFlowVerdict.NONE}
    assert result.tensorflow is None


def test_a_loss_that_also_fails_eagerly_is_an_error() -> None:
    import tensorflow as tf

    weight = tf.Variable(1.0, name="weight")

    def loss() -> Any:
        value = float(weight)
        return tf.constant(value) / 0 if value else None

    def broken() -> Any:
        raise ZeroDivisionError("no")

    error = _trace_error(loss)
    with pytest.raises(GradcheckError, match="and fails when run eagerly at .*: ZeroDivisionError"):
        eager_fallback(broken, "loss", HERE, [weight], {}, {}, error, verify=False)


def test_any_way_out_of_tensorflow_reaches_the_tape_with_its_line() -> None:
    import numpy as np
    import tensorflow as tf

    weight = tf.Variable([1.0, 2.0], name="weight")
    kept = tf.Variable(0.5, name="kept")

    def variable_numpy() -> Any:
        return tf.constant(weight.numpy().sum()) * kept  # LEAVES

    def exp_through_numpy() -> Any:
        return tf.reduce_sum(tf.constant(np.exp(weight * 2.0))) * kept  # LEAVES

    def python_max() -> Any:
        return max(weight[0] * 2.0, weight[1] * 1.0) + kept  # LEAVES

    def as_int() -> Any:
        return tf.cast(int(tf.reduce_sum(weight)), tf.float32) * kept  # LEAVES

    for loss in (variable_numpy, exp_through_numpy, python_max, as_int):
        error = _trace_error(loss)
        result = eager_fallback(loss, "loss", HERE, [weight, kept], {}, {}, error, False)
        oracle = tf_verdicts(loss, [weight, kept])
        assert {n for n, v in result.gradients.items() if v.dead} == dead_names(oracle)
        assert result.left_at is not None, loss.__name__
        assert "# LEAVES" in HERE.read_text().splitlines()[result.left_at.line - 1]


def test_a_shape_error_that_also_fails_eagerly_is_the_trace_error() -> None:
    import tensorflow as tf

    weight = tf.Variable([1.0, 2.0], name="weight")
    other = tf.Variable([1.0, 2.0, 3.0], name="other")

    def loss() -> Any:
        return tf.reduce_sum(tf.matmul(weight, other))

    error = _trace_error(loss)
    with pytest.raises(GradcheckError, match=r"cannot be traced at .*: Shape must be rank 2") as e:
        eager_fallback(loss, "loss", HERE, [weight, other], {}, {}, error, verify=False)
    assert "\n" not in str(e.value) and "eagerly" not in str(e.value)


def test_a_loss_that_takes_inputs_is_not_run_eagerly() -> None:
    import tensorflow as tf

    weight = tf.Variable(1.0, name="weight")

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def loss(x: Any) -> Any:
        return tf.constant(float(x)) * weight

    error = _trace_error(loss)
    with pytest.raises(GradcheckError, match="cannot be traced at .*: ") as raised:
        eager_fallback(loss, "loss", HERE, [weight], {}, {}, error, verify=False)
    assert "eagerly" not in str(raised.value)
