"""A Keras model that keeps its layers inside a plain dataclass: Keras tracks attributes, lists,
tuples and dicts, not other objects, so the model has no weights at all and `fit` asks for no
gradient ("Empty trainable variables") while both layers are read by the loss.
"""

import dataclasses

import keras
import numpy as np


@dataclasses.dataclass
class Blocks:
    encoder: keras.layers.Layer
    head: keras.layers.Layer


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.blocks = Blocks(
            keras.layers.Dense(8, activation="relu", name="encoder"),
            keras.layers.Dense(1, name="head"),
        )

    def call(self, x):
        return self.blocks.head(self.blocks.encoder(x))


model = Net()
model.compile(optimizer="adam", loss="mse")
x = np.random.rand(8, 4).astype("float32")
y = np.random.rand(8, 1).astype("float32")
model.fit(x, y, epochs=1, batch_size=8, verbose=0)
