"""A classifier whose loss compares the argmax of the logits with the labels."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = tf.constant(rng.normal(size=(8, 4)), tf.float32)
labels = tf.constant(rng.integers(0, 3, size=8), tf.int64)

kernel = tf.Variable(tf.random.normal([4, 3], seed=1), name="kernel")
bias = tf.Variable(tf.zeros([3]), name="bias")


@tf.function
def loss():
    logits = tf.matmul(features, kernel) + bias
    predicted = tf.argmax(logits, axis=-1)
    errors = tf.cast(tf.not_equal(predicted, labels), tf.float32)
    return tf.reduce_mean(errors)
