"""A tf.round under a gradient_override_map keyed by the wrong op type ("Floor"), with a
tf.stop_gradient on the scale: the map never applies, and the key is the bug."""

import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
graph = tf.get_default_graph()
x = tf.placeholder(tf.float32, [None, 4], name="x")
w = tf.Variable(tf.ones([4, 2]), name="w")
scale = tf.Variable(4.0, name="scale")
with graph.gradient_override_map({"Floor": "Identity"}):
    q = tf.round(w * tf.stop_gradient(scale))
loss = tf.reduce_mean(tf.square(tf.matmul(x, q / 4.0)))
