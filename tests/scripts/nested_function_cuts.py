"""A loss that calls a tf.function whose tf.cond rounds `offset` in one branch, and a while
loop whose body casts `step` to an integer: each cut lies inside a nested function."""

import tensorflow as tf

offset = tf.Variable([0.1, 0.2], name="offset")
step = tf.Variable(0.5, name="step")
gain = tf.Variable(1.5, name="gain")


@tf.function
def shifted(x, shift):
    positive = tf.reduce_sum(x) > 0.0
    return tf.cond(positive, lambda: x + tf.round(shift), lambda: x - shift * 0.0)


@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def loss(x):
    moved = shifted(x, offset)
    _, total = tf.while_loop(
        lambda i, t: i < 3,
        lambda i, t: (i + 1, t + tf.cast(tf.cast(step, tf.int32), tf.float32)),
        (tf.constant(0), tf.constant(0.0)),
    )
    return tf.reduce_sum(moved * gain) + total
