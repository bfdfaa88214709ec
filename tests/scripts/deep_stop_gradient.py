"""A 52-layer Keras model whose whole output is under one tf.stop_gradient before a head."""

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = tf.constant(rng.normal(size=(8, 2)), tf.float32)
targets = tf.constant(rng.normal(size=(8, 2)), tf.float32)

teacher = keras.Sequential([keras.layers.Dense(2) for _ in range(52)], name="teacher")
student = keras.layers.Dense(2, name="student")
teacher(features)
student(features)


@tf.function
def loss():
    guide = tf.stop_gradient(teacher(features))
    return tf.reduce_mean(tf.square(student(features) - guide - targets))
