"""Accuracy as the loss: rounded predictions compared with the labels, a count of right answers
that has no gradient."""

import tensorflow as tf

kernel = tf.Variable(tf.random.stateless_normal([4, 1], seed=[1, 2]), name="kernel")
inputs = tf.random.stateless_normal([8, 4], seed=[3, 4])
labels = tf.cast(tf.random.stateless_uniform([8, 1], seed=[5, 6]) > 0.5, tf.float32)


@tf.function
def loss():
    predictions = tf.sigmoid(tf.matmul(inputs, kernel))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.round(predictions), labels), tf.float32))
    return 1.0 - accuracy
