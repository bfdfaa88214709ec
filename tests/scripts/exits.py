"""A script that exits while it is imported."""

import sys

import tensorflow as tf

w = tf.Variable(1.0)
sys.exit(3)
