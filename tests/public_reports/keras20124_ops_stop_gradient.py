"""Keras 3 keras.ops.stop_gradient inside a functional model.

Source: https://github.com/keras-team/keras/issues/20124 (`d = ops.stop_gradient(b) + c` with
b = Dense(4)(a), c = Dense(4)(b): the first Dense still trains through c). Added one branch the
stop_gradient really cuts: aux = Dense(4)(a), added as ops.stop_gradient(aux).
TF truth: aux/kernel, aux/bias get None; dense_b and dense_c train.
"""
import numpy as np
import keras
from keras import Input, Model, layers, ops

a = Input(shape=(2,))
b = layers.Dense(4, name="dense_b")(a)
c = layers.Dense(4, name="dense_c")(b)
aux = layers.Dense(4, name="aux")(a)
d = ops.stop_gradient(b) + c + ops.stop_gradient(aux)
model = Model(inputs=a, outputs=d)
model.compile(optimizer="sgd", loss="mse")
model.fit(np.random.rand(8, 2).astype("float32"), np.random.rand(8, 4).astype("float32"),
          epochs=1, batch_size=8, verbose=0)
