"""Keras layers built every way a script builds them: each weight must be created at the line
that constructed its own layer, marked `# builds NAME` (tests/tracing/test_keras_creation_lines.py).

Run as a script (`gradcheck run`), it asks once for the gradients of every model's weights.
"""

import keras
import tensorflow as tf


def dense(units, name):
    return keras.layers.Dense(units, name=name)  # builds block_0, block_1


inputs = keras.Input(shape=(3,))
hidden = keras.layers.Dense(4, name="hidden")(inputs)  # builds hidden
logits = keras.layers.Dense(2, name="logits")(hidden)  # builds logits
functional = keras.Model(inputs, logits, name="functional")

sequential = keras.Sequential(
    [
        keras.layers.Dense(4, name="first"),  # builds first
        keras.layers.Dense(2, name="second"),  # builds second
    ],
    name="sequential",
)


class Scale(keras.layers.Layer):
    def build(self, input_shape):
        self.factor = self.add_weight(shape=(), initializer="ones", name="factor")

    def call(self, x):
        return x * self.factor


class Tower(keras.Model):
    def __init__(self):
        super().__init__(name="tower")
        self.blocks = [dense(4, f"block_{i}") for i in range(2)]
        self.head = keras.layers.Dense(1, name="head")  # builds head
        self.scale = Scale(name="scale")  # builds scale
        self.gain = self.add_weight(shape=(), initializer="ones", name="gain")

    def call(self, x):
        for block in self.blocks:
            x = block(x)
        return self.scale(self.head(x)) * self.gain


tower = Tower()  # builds tower
x = tf.random.normal((2, 3))


def loss():
    return tf.reduce_sum(functional(x)) + tf.reduce_sum(sequential(x)) + tf.reduce_sum(tower(x))


if __name__ == "__main__":
    with tf.GradientTape() as tape:
        value = loss()
    models = (functional, sequential, tower)
    tape.gradient(value, [weight for model in models for weight in model.trainable_variables])
