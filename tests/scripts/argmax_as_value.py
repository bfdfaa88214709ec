"""A regression on the position of the largest score: the argmax is used as a number."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = tf.constant(rng.normal(size=(8, 4)), tf.float32)
targets = tf.constant(rng.integers(0, 5, size=8), tf.float32)

kernel = tf.Variable(tf.random.normal([4, 5], seed=1), name="kernel")


@tf.function
def loss():
    scores = tf.matmul(features, kernel)
    position = tf.cast(tf.argmax(scores, axis=-1), tf.float32)
    return tf.reduce_mean(tf.square(position - targets))
