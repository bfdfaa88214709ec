"""A Keras weight's own `.numpy()` in an eager loop's loss (a penalty computed in NumPy and
added as a float): the value leaves TensorFlow at that line, so the weight gets no gradient."""

import keras
import numpy as np
import tensorflow as tf


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.body = keras.layers.Dense(4)
        self.scale = self.add_weight(shape=(4,), initializer="ones", name="scale")

    def call(self, x):
        return self.body(x)


model = Net()
optimizer = keras.optimizers.SGD(0.1)
x = tf.random.normal([8, 3])
y = tf.random.normal([8, 4])
for _ in range(2):
    with tf.GradientTape() as tape:
        penalty = float(np.abs(model.scale.numpy() - 1).sum())
        loss = tf.reduce_mean((model(x) - y) ** 2) + penalty
    grads = tape.gradient(loss, model.trainable_variables)
    pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
    optimizer.apply_gradients(pairs)
