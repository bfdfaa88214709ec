"""Predictions rounded to hard 0/1 values before the loss: tf.round of a sigmoid's
probabilities. The rounding cuts the kernel and the bias alike; one straight-through rounding
of the probabilities trains both."""

import tensorflow as tf

kernel = tf.Variable([[0.3], [-0.2], [0.1]], name="kernel")
bias = tf.Variable([0.05], name="bias")


@tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec([4, 1])])
def loss(x, y):
    probs = tf.sigmoid(tf.matmul(x, kernel) + bias)
    bits = tf.round(probs)
    return tf.reduce_mean(tf.square(y - bits))
