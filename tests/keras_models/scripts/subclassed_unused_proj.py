"""A compiled subclassed Keras model whose `proj` layer is built but never called.

`build()` builds `proj` so it owns weights, but `call()` goes straight from `body` to `head`:
`model.fit` would warn that `proj`'s kernel and bias have no gradient.

    gradcheck subclassed_unused_proj.py --loss model      # exits 1: proj's weights are unused
"""

import keras
import numpy as np
from keras import layers

FEATURES = 8
CLASSES = 4


class Encoder(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(name="encoder", **kwargs)
        self.body = layers.Dense(32, activation="relu", name="body")
        self.proj = layers.Dense(32)
        self.head = layers.Dense(CLASSES, name="head")

    def build(self, input_shape):
        self.body.build(input_shape)
        self.proj.build((None, 32))
        self.head.build((None, 32))

    def call(self, x):
        return self.head(self.body(x))


model = Encoder()
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model(np.zeros((2, FEATURES), dtype="float32"))
