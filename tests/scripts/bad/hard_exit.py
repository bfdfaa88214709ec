import os
import tensorflow as tf
w = tf.Variable(1.0)
os._exit(7)
