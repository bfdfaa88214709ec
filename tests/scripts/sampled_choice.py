"""A policy's logits sampled with tf.random.categorical, the drawn index used to pick a row
of a table: the draw has no gradient, and the policy never trains."""

import tensorflow as tf

policy = tf.keras.layers.Dense(4, name="policy")
table = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), (4, 3)), trainable=False)
x = tf.reshape(tf.range(40, dtype=tf.float32), (8, 5)) / 40.0


def loss():
    logits = policy(x)
    index = tf.random.categorical(logits, 1)[:, 0]
    chosen = tf.gather(table, index)
    return tf.reduce_mean(chosen**2)
