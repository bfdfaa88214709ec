"""Leaves processes that never end, then defines a loss that trains its variable."""

import tensorflow as tf
from leave_children import leave_children

leave_children()

w = tf.Variable(2.0, name="w")


def loss():
    return w * w
