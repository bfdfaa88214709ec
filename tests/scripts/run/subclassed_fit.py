"""A subclassed Keras model trained with `fit`, never built before: its weights are made by its
first training step. A side branch is added under `tf.stop_gradient`, so its layer never trains.

    python subclassed_fit.py      # trains one epoch
"""

import os

import keras
import numpy as np
import tensorflow as tf


class Regressor(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu", name="hidden")
        self.head = keras.layers.Dense(1, name="head")
        self.side = keras.layers.Dense(1, name="side")

    def call(self, inputs):
        return self.head(self.hidden(inputs)) + tf.stop_gradient(self.side(inputs))


class MarkFirstStep(keras.callbacks.Callback):
    """Writes the marker file once the first optimizer step is done."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            with open(self.path, "w") as marker:
                marker.write("trained\n")


model = Regressor()
model.compile(optimizer="sgd", loss="mse")
rng = np.random.default_rng(0)
features = rng.standard_normal((16, 4)).astype("float32")
targets = rng.standard_normal((16, 1)).astype("float32")
marker = MarkFirstStep(os.environ.get("GRADCHECK_TEST_MARKER", "subclassed_fit.marker"))
model.fit(features, targets, batch_size=8, epochs=1, verbose=0, callbacks=[marker])
