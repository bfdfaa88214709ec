"""A variable the loss never reads: its fix is advice in words, never an edit."""

import tensorflow as tf

features = tf.random.stateless_normal([8, 4], seed=[0, 1])
kernel = tf.Variable(tf.random.stateless_normal([4, 2], seed=[1, 2]), name="kernel")
spare = tf.Variable(tf.zeros([2]), name="spare")


@tf.function
def loss():
    return tf.reduce_mean(tf.square(tf.matmul(features, kernel)))
