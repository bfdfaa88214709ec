"""A newcomer's Keras script trained with `fit`: a layer picks a class with tf.argmax, so its
kernel never trains, and a tf.stop_gradient after the cut is redundant (a warning).

    python fit_picks_by_argmax.py      # trains one epoch
"""

import numpy as np
import tensorflow as tf


class Picker(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 4), name="kernel")

    def call(self, x):
        scores = tf.matmul(x, self.kernel)
        choice = tf.argmax(scores, axis=-1)
        return tf.cast(choice, tf.float32)[:, None] + tf.stop_gradient(x[:, :1] * 0.0 + 1.0)


inputs = tf.keras.Input(shape=(8,))
hidden = tf.keras.layers.Dense(8)(inputs)
picked = Picker()(hidden)
outputs = tf.keras.layers.Dense(1)(tf.keras.layers.Concatenate()([hidden, picked]))
model = tf.keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss="mse")

x = np.random.rand(32, 8).astype("float32")
y = np.random.rand(32, 1).astype("float32")
model.fit(x, y, epochs=1, verbose=0)
