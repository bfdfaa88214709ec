"""A model that trains `gate` in one branch of a tf.cond but stops it in the other, and a
`threshold` that only the else-branch uses, through a rounding."""

import tensorflow as tf

gate = tf.Variable([0.5, 0.5], name="gate")
threshold = tf.Variable([0.2, 0.8], name="threshold")
scale = tf.Variable(2.0, name="scale")


@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def loss(x):
    warm = tf.reduce_sum(x) > 0.0
    mixed = tf.cond(
        warm,
        lambda: x * gate,
        lambda: tf.stop_gradient(gate) * tf.round(threshold) * x,
    )
    return tf.reduce_sum(mixed * scale)
