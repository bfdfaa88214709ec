"""Two loss-like functions and no --loss: gradcheck must ask which one."""

import tensorflow as tf

w = tf.Variable(1.0, name="w")


def train_loss():
    return w * 2.0


def eval_loss():
    return w * 3.0
