"""Soft targets through TensorFlow's v1 softmax cross-entropy, which wraps its labels in a
tf.stop_gradient of its own: the temperature that shapes the targets never trains. The
user's own tf.stop_gradient on the teacher's logits is intended."""

import tensorflow as tf

student = tf.Variable(tf.random.stateless_normal([4, 3], seed=[1, 2]), name="student")
temperature = tf.Variable(2.0, name="temperature")
teacher_logits = tf.random.stateless_normal([8, 3], seed=[5, 6])
x = tf.random.stateless_normal([8, 4], seed=[3, 4])


def loss():
    targets = tf.nn.softmax(tf.stop_gradient(teacher_logits) / temperature)
    logits = x @ student
    return tf.reduce_mean(
        tf.compat.v1.nn.softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    )
