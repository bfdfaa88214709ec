"""A script that raises while it is imported."""

import tensorflow as tf

w = tf.Variable(1.0)
ratio = 1 / 0
