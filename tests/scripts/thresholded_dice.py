"""A Dice loss on a hard-thresholded prediction after a normalization: the comparison is the cut
to change; the stop_gradient inside tf.nn.moments is on a side path (removing it trains nothing)."""

import tensorflow as tf

kernel = tf.Variable(tf.random.stateless_normal([4, 3], seed=[1, 2]), name="kernel")
inputs = tf.random.stateless_normal([8, 4], seed=[3, 4])
labels = tf.cast(tf.random.stateless_uniform([8, 3], seed=[5, 6]) > 0.5, tf.float32)


@tf.function
def loss():
    features = tf.matmul(inputs, kernel)
    mean, variance = tf.nn.moments(features, axes=[0], keepdims=True)
    normalized = (features - mean) / tf.sqrt(variance + 1e-3)
    predicted = tf.cast(normalized > 0.5, tf.float32)
    overlap = tf.reduce_sum(predicted * labels)
    return 1.0 - 2.0 * overlap / (tf.reduce_sum(predicted) + tf.reduce_sum(labels) + 1e-6)
