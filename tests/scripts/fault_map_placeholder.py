"""The seed's weight transform with its fault map fed at run time: the BitwiseXor's other input
is a placeholder, which carries no gradient, so the straight-through rewrite still applies."""

import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

images = tf.placeholder(tf.float32, [None, 6], name="images")
fmap = tf.placeholder(tf.int32, [6, 4], name="fault_map")
weights_i = tf.Variable(tf.truncated_normal([6, 4], stddev=0.4), name="weights_i")
weights_fx = tf.cast(tf.multiply(268435456.0, weights_i), tf.int32)
weights_fl = tf.cast(tf.bitwise.bitwise_xor(weights_fx, fmap), tf.float32)
weights = tf.stop_gradient(tf.multiply(1.0 / 268435456.0, weights_fl))
loss = tf.reduce_mean(tf.square(tf.matmul(images, weights)))
