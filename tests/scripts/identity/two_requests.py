"""Two gradient requests, each for two unnamed tf.Variables (all four are `Variable` to
TensorFlow): a discriminator step, then a generator step whose bias is cut by an integer cast."""

import os
from pathlib import Path

import tensorflow as tf

x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
d_w = tf.Variable(tf.ones([2]))
d_b = tf.Variable(0.5)
g_w = tf.Variable(tf.ones([2]))
g_b = tf.Variable(0.1)
d_optimizer = tf.keras.optimizers.SGD(0.01)
g_optimizer = tf.keras.optimizers.SGD(0.01)

for _ in range(2):
    with tf.GradientTape() as tape:
        fake = x * g_w + g_b
        d_loss = tf.reduce_mean(d_w * tf.stop_gradient(fake) + d_b)
    d_gradients = tape.gradient(d_loss, [d_w, d_b])
    with tf.GradientTape() as tape:
        fake = g_w * x + tf.cast(tf.cast(g_b, tf.int32), tf.float32)
        g_loss = -tf.reduce_mean(d_w * fake + d_b)
    g_gradients = tape.gradient(g_loss, [g_w, g_b])
    d_optimizer.apply_gradients(zip(d_gradients, [d_w, d_b]))
    g_optimizer.apply_gradients(zip(g_gradients, [g_w, g_b]))
    Path(os.environ.get("GRADCHECK_TEST_MARKER", "trained.marker")).write_text("trained")
