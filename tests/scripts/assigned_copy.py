"""A weight's transform stored into a second variable that the loss reads: the assignment
passes no gradient to the value it stores, so the weight never trains."""

import tensorflow as tf

weight = tf.Variable(tf.ones([3]), name="weight")
shadow = tf.Variable(tf.zeros([3]), trainable=False, name="shadow")
x = tf.constant([1.0, 2.0, 3.0])


def loss():
    shadow.assign(weight * 2.0)
    return tf.reduce_sum(shadow * x)
