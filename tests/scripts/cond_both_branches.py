"""A tf.cond whose two lambdas both round the variable: each branch's cut is on its own line."""

import tensorflow as tf

w = tf.Variable([0.5, 1.5], name="w")
b = tf.Variable(1.0, name="b")


@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def loss(x):
    y = tf.cond(
        tf.reduce_sum(x) > 0.0,
        lambda: tf.round(w * x),
        lambda: tf.round(w - x),
    )
    return tf.reduce_sum(y) + b
