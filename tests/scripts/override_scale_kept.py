"""A ternary quantiser (DoReFa style) whose gradient_override_map is keyed by the wrong op type
("Floor" over a tf.round), with a tf.stop_gradient on its scale: the scale's path and the
rounded path are two ways to the loss, each cut. The map keyed by "Round" opens the rounded one;
the stop_gradient on the scale is meant, and stays."""

import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
graph = tf.get_default_graph()
x = tf.placeholder(tf.float32, [None, 4], name="x")
v = tf.Variable(tf.ones([4, 2]), name="v")
E = tf.stop_gradient(tf.reduce_mean(tf.abs(v)))
with graph.gradient_override_map({"Floor": "Identity"}):
    q = tf.round(tf.clip_by_value(v / E, -1.0, 1.0)) * E
loss = tf.reduce_mean(tf.square(tf.matmul(x, q)))
