"""Tracing a loss function: which functions can be traced, which output is the loss, and
TensorFlow's own gradients on it when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import TensorFlowVerdict
from gradcheck_cli.tracing.function_tracing import (
    concrete_function,
    loss_output_index,
    trace_live_function,
    trace_loss,
)
from gradcheck_cli.tracing.tf_verification import TAPE
from tests.tf_oracle_inprocess import tf_verdicts

HERE = Path(__file__)


def test_a_tf_function_with_arguments_needs_an_input_signature() -> None:
    import tensorflow as tf

    @tf.function
    def loss(x: Any) -> Any:
        return x * 2.0

    with pytest.raises(GradcheckError, match="takes arguments but has no input_signature"):
        concrete_function(loss, "loss", HERE)
    signed = tf.function(loss.python_function, input_signature=[tf.TensorSpec([], tf.float32)])
    assert type(concrete_function(signed, "loss", HERE)).__name__ == "ConcreteFunction"


def test_the_loss_is_the_only_output_or_the_loss_key() -> None:
    import tensorflow as tf

    weight = tf.Variable(1.0)
    keyed = concrete_function(lambda: {"aux": weight * 3.0, "loss": weight * 2.0}, "f", HERE)
    index = loss_output_index(keyed, "f")
    assert keyed.graph.outputs[index] is keyed.structured_outputs["loss"]
    assert keyed.graph.outputs[1 - index] is keyed.structured_outputs["aux"]
    two = concrete_function(lambda: (weight * 2.0, weight * 3.0), "two", HERE)
    with pytest.raises(GradcheckError, match="two returns 2 tensors"):
        loss_output_index(two, "two")


def test_verification_asks_the_tape_on_random_inputs() -> None:
    import tensorflow as tf

    live = tf.Variable([1.0, 2.0], name="live")
    cut = tf.Variable([3.0, 4.0], name="cut")

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def loss(x: Any) -> Any:
        return tf.reduce_sum(live * x) + tf.reduce_sum(tf.stop_gradient(cut) * x)

    traced = trace_loss(concrete_function(loss, "loss", HERE), "loss", [live, cut], verify=True)
    assert [r.variable.name for r in traced.variables] == ["live", "cut"]
    assert all(r.arg_index is not None for r in traced.variables)
    assert traced.tensorflow is not None and traced.tensorflow.method == TAPE
    oracle = tf_verdicts(loss, [live, cut], [tf.ones([2])])
    assert {n: v.value for n, v in (traced.tensorflow.verdicts or {}).items()} == oracle
    assert traced.tensorflow.verdicts == {
        "live": TensorFlowVerdict.GRADIENT,
        "cut": TensorFlowVerdict.NONE,
    }


def test_a_live_function_names_keras_weights_by_their_path() -> None:
    import keras
    import tensorflow as tf

    layer = keras.layers.Dense(1, name="head")
    layer.build((None, 2))

    def loss() -> Any:
        return tf.reduce_sum(layer(tf.ones([1, 2])))

    traced = trace_live_function(loss, layer.weights, verify=False)
    assert traced.loss_name == "loss" and traced.tensorflow is None
    assert sorted(r.variable.name for r in traced.variables) == ["head/bias", "head/kernel"]
