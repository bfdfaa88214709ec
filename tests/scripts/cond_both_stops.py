"""A tf.cond whose two lambdas both stop the gradient: both lines must change."""

import tensorflow as tf

w = tf.Variable([0.5, 1.5], name="w")
b = tf.Variable(1.0, name="b")


@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def loss(x):
    y = tf.cond(
        tf.reduce_sum(x) > 0.0,
        lambda: tf.stop_gradient(w * x),
        lambda: tf.stop_gradient(w - x),
    )
    return tf.reduce_sum(y) + b
