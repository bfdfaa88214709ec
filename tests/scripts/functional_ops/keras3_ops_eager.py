"""keras.ops.stop_gradient inside a Keras 3 functional model, called in an eager tape."""

import keras
import tensorflow as tf
from keras import layers, ops

a = keras.Input(shape=(2,))
b = layers.Dense(4, name="dense_b")(a)
aux = layers.Dense(4, name="aux")(a)
d = b + ops.stop_gradient(aux)
model = keras.Model(a, d)
optimizer = keras.optimizers.SGD(0.1)
x = tf.random.normal([8, 2])
with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(model(x)))
grads = tape.gradient(loss, model.trainable_variables)
pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
optimizer.apply_gradients(pairs)
