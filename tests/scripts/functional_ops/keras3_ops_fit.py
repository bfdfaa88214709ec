"""keras.ops.stop_gradient inside a Keras 3 functional model, trained by fit: the first Dense
still trains through `c`, the `aux` branch is cut (keras-team/keras#20124)."""

import keras
import numpy as np
from keras import layers, ops

a = keras.Input(shape=(2,))
b = layers.Dense(4, name="dense_b")(a)
c = layers.Dense(4, name="dense_c")(b)
aux = layers.Dense(4, name="aux")(a)
d = ops.stop_gradient(b) + c + ops.stop_gradient(aux)
model = keras.Model(inputs=a, outputs=d)
model.compile(optimizer="sgd", loss="mse")
x = np.random.rand(8, 2).astype("float32")
model.fit(x, np.random.rand(8, 4).astype("float32"), epochs=1, batch_size=8, verbose=0)
