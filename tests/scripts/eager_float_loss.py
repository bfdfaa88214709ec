"""A plain loss function that turns a tensor into a Python float: no gradient through it."""

import tensorflow as tf

scale = tf.Variable([2.0], name="scale")
offset = tf.Variable([1.0], name="offset")


def loss():
    factor = float(tf.reduce_sum(scale))
    return tf.reduce_sum(offset) * factor
