"""A TF1 graph-mode script: the loss is a tensor of the default graph."""

import tensorflow as tf

tf.compat.v1.disable_eager_execution()
w = tf.compat.v1.get_variable("w", initializer=2.0)
unused = tf.compat.v1.get_variable("unused", initializer=3.0)
loss = w * w + tf.stop_gradient(unused)
