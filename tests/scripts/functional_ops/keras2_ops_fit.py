"""Keras 2 (tf_keras): tf.stop_gradient and tf.nn.moments on symbolic tensors of a functional
model, trained by fit: each becomes an op layer that the model replays. The `aux` branch is cut
by the user's stop_gradient; the stop_gradient tf.nn.moments makes inside is TensorFlow's own."""

import numpy as np
import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

a = keras.Input(shape=(4,))
b = layers.Dense(4, name="dense_b")(a)
aux = layers.Dense(4, name="aux")(a)
mean, variance = tf.nn.moments(b, axes=[1], keepdims=True)
d = (b - mean) / tf.sqrt(variance + 1e-3) + tf.stop_gradient(aux)
model = keras.Model(a, d)
model.compile(optimizer="sgd", loss="mse")
x = np.random.rand(8, 4).astype("float32")
model.fit(x, np.random.rand(8, 4).astype("float32"), epochs=1, verbose=0)
