"""How to propagate gradients after a assign op?
https://github.com/tensorflow/tensorflow/issues/54568
(also filed as https://github.com/keras-team/keras/issues/16128)

A memory layer wrote the controller's output into its memory variable with
an assign (`key_memory.assign(...)`) and then read the memory back to produce its output. An assign
passes no gradient to the value it stores, so every controller weight gets "Gradients do not
exist for variables ... when minimizing the loss". As the user found (and as the TF maintainers say
of assign in general, e.g. #30234: replace the variable with a normal tensor), updating the memory
with plain tensor ops and `=` keeps the path to the loss.
"""
import numpy as np
import tensorflow as tf
from tensorflow import keras; keras.utils.set_random_seed(0)


class MemoryLayer(keras.layers.Layer):
    def __init__(self, n_clusters=4, key_dims=8, **kwargs):
        super().__init__(**kwargs)
        self.controller = keras.layers.Dense(key_dims, activation="relu", name="write_controller")
        self.erase = keras.layers.Dense(key_dims, activation="sigmoid", name="key_erase_layer")
        self.n_clusters, self.key_dims = n_clusters, key_dims

    def build(self, input_shape):
        self.key_memory = self.add_weight(shape=(self.n_clusters, self.key_dims), initializer="ones", trainable=False, name="key_memory")

    def call(self, x):
        h = self.controller(x)
        e = tf.reduce_mean(self.erase(h), axis=0)
        self.key_memory.assign(self.key_memory * (1.0 - e) + tf.reduce_mean(h, axis=0))
        return tf.matmul(x[:, : self.key_dims], self.key_memory, transpose_b=True)


model = keras.Sequential([keras.Input((8,)), MemoryLayer(), keras.layers.Dense(1, name="head")])
model.compile(optimizer="adam", loss="mse")
x = np.random.RandomState(0).randn(16, 8).astype("float32")
y = np.random.RandomState(1).randn(16, 1).astype("float32")
model.fit(x, y, epochs=1, batch_size=16, verbose=0)
