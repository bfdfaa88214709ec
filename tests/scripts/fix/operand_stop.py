"""A tf.stop_gradient of a sum, used as an operand: without it the sum needs its parentheses."""

import tensorflow as tf

features = tf.random.stateless_normal([8, 4], seed=[0, 1])
kernel = tf.Variable(tf.random.stateless_normal([4, 2], seed=[1, 2]), name="kernel")
bias = tf.Variable(tf.zeros([2]), name="bias")


@tf.function
def loss():
    outputs = tf.matmul(features, kernel)
    return tf.reduce_mean(tf.stop_gradient(outputs + bias) * 3.0 + outputs)
