"""A value computed from a variable at import: the loss captures it as a constant."""

import tensorflow as tf

weights = tf.Variable([1.0, 2.0], name="weights")
bias = tf.Variable([0.5], name="bias")
frozen = tf.identity(weights) * 2.0


def loss():
    return tf.reduce_sum(frozen) + tf.reduce_sum(bias)
