"""A comparison inside a multi-line tf.cond lambda: `threshold` only decides a mask, and the
comparison carries no gradient; `offset` is rounded inside a nested function that the other
branch calls; `scale` trains."""

import tensorflow as tf

threshold = tf.Variable([0.2, 0.8], name="threshold")
offset = tf.Variable([0.1, 0.3], name="offset")
scale = tf.Variable(2.0, name="scale")


@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def loss(x):
    def snapped(value):
        steps = value * 4.0
        return tf.round(steps) / 4.0

    masked = tf.cond(
        tf.reduce_sum(x) > 0.0,
        lambda: (
            tf.cast(
                x > threshold,
                tf.float32,
            )
            * x
        ),
        lambda: x + snapped(offset),
    )
    return tf.reduce_sum(masked * scale)
