"""A loss that is Python's max() of two tensors, both variables unnamed ("Variable" twice):
max picks `high`'s product, and `low` is not part of the loss."""

import tensorflow as tf

low = tf.Variable(1.0)
high = tf.Variable(2.0)
x = tf.constant(3.0)


def loss():
    return max(low * x, high * x)
