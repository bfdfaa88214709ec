"""A subclassed Keras model trained with `fit`: its `auxiliary` layer is built, so its weights
are trainable variables of the model, but `call` never uses it, so they never train.

    python keras_fit_unused.py      # trains one epoch; Keras warns that gradients do not exist
"""

import os

import keras
import numpy as np


class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu", name="hidden")
        self.head = keras.layers.Dense(3, name="head")
        self.auxiliary = keras.layers.Dense(3, name="auxiliary")

    def build(self, input_shape):
        self.hidden.build(input_shape)
        self.head.build((input_shape[0], 8))
        self.auxiliary.build((input_shape[0], 8))

    def call(self, inputs):
        return self.head(self.hidden(inputs))


class MarkFirstStep(keras.callbacks.Callback):
    """Writes the marker file once the first optimizer step is done."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            with open(self.path, "w") as marker:
                marker.write("trained\n")


def main():
    rng = np.random.default_rng(0)
    features = rng.standard_normal((16, 4)).astype("float32")
    labels = rng.integers(0, 3, size=16)
    model = Classifier()
    model.build((None, 4))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="sgd", loss=loss)
    marker = MarkFirstStep(os.environ.get("GRADCHECK_TEST_MARKER", "keras_fit_unused.marker"))
    model.fit(features, labels, batch_size=8, epochs=1, verbose=0, callbacks=[marker])
    print("trained one epoch")


if __name__ == "__main__":
    main()
