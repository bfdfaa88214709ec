"""A subclassed model whose first layer's output is overwritten on the next line before anything
reads it: the layer trains nothing."""

import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.linear1 = tf.keras.layers.Dense(8)
        self.linear2 = tf.keras.layers.Dense(1)

    def call(self, x):
        output = self.linear1(x)
        output = self.linear2(x)
        return output


model = Net()
x = tf.random.stateless_normal([8, 4], seed=[1, 2])
y = tf.random.stateless_normal([8, 1], seed=[3, 4])
model(x)


@tf.function
def loss():
    return tf.reduce_mean(tf.square(model(x) - y))
