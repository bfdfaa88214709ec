"""A registered custom Keras layer, for `.keras` files that `--import` must make loadable: its
`gate` weight reaches the output only through tf.stop_gradient, its `spare` weight not at all."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="gradcheck_tests")
class GatedDense(keras.layers.Layer):
    def __init__(self, units: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape: Any) -> None:
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.units))
        self.gate = self.add_weight(name="gate", shape=(self.units,), initializer="ones")
        self.spare = self.add_weight(name="spare", shape=(self.units,))

    def call(self, inputs: Any) -> Any:
        return tf.matmul(inputs, self.kernel) * tf.stop_gradient(self.gate)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "units": self.units}


def gated_model() -> keras.Model:
    """A compiled functional model around one GatedDense layer."""
    inputs = keras.Input((3,))
    hidden = GatedDense(4, name="gated")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, name="head")(hidden))
    model.compile(optimizer="sgd", loss="mse")
    return model
