"""A comparison inside a multi-line tf.cond lambda: `threshold` only decides a mask, and the
comparison carries no gradient; `scale` trains."""

import tensorflow as tf

threshold = tf.Variable([0.2, 0.8], name="threshold")
scale = tf.Variable(2.0, name="scale")


@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def loss(x):
    masked = tf.cond(
        tf.reduce_sum(x) > 0.0,
        lambda: (
            tf.cast(
                x > threshold,
                tf.float32,
            )
            * x
        ),
        lambda: x,
    )
    return tf.reduce_sum(masked * scale)
