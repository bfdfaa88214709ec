"""The loss reads its kernel through a helper module whose tf.stop_gradient is the only cut:
the fix is an edit of scaling.py."""

import tensorflow as tf
from scaling import scaled

features = tf.random.stateless_normal([8, 4], seed=[0, 1])
kernel = tf.Variable(tf.random.stateless_normal([4, 2], seed=[1, 2]), name="kernel")


@tf.function
def loss():
    return tf.reduce_mean(tf.square(tf.matmul(features, scaled(kernel, 2.0))))
