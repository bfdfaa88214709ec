"""A value computed from a variable at import: the loss captures it as a constant. Another
variable is read at import too, but nothing the loss captures comes from it."""

import tensorflow as tf

weights = tf.Variable([1.0, 2.0], name="weights")
bias = tf.Variable([0.5], name="bias")
spare = tf.Variable([3.0], name="spare")
frozen = tf.identity(weights) * 2.0
spare_norm = float(tf.norm(spare))


def loss():
    return tf.reduce_sum(frozen) + tf.reduce_sum(bias)
