"""A plain loss that reads a tf.Variable's value with `.numpy()`: no gradient reaches it."""

import tensorflow as tf

scale = tf.Variable([2.0, 3.0], name="scale")
offset = tf.Variable([1.0], name="offset")


def loss():
    factor = scale.numpy().sum()
    return tf.reduce_sum(offset) * factor
