"""A loss that leaves TensorFlow through NumPy: it runs eagerly, but the gradient cannot follow."""

import numpy as np
import tensorflow as tf

weights = tf.Variable([1.0, 2.0], name="weights")
bias = tf.Variable([0.5], name="bias")
spare = tf.Variable([3.0], name="spare")


def loss():
    prediction = weights * 2.0 + bias
    mean = np.mean(prediction.numpy())
    return tf.constant(mean) + tf.reduce_sum(bias)
