"""A functional GAN checked on the generator's loss alone: the discriminator, which another loss
trains, is never read; Keras 3 leaves the model out of its layers' names."""

import keras
import tensorflow as tf
from keras import layers

z = keras.Input((4,))
h = layers.Dense(8, name="g_hidden")(z)
generator = keras.Model(z, layers.Dense(2, name="g_out")(h), name="generator")
inputs = keras.Input((2,))
x = layers.Dense(8, name="d_hidden")(inputs)
x = layers.Dense(1, name="d_out")(x)
discriminator = keras.Model(inputs, x, name="discriminator")
noise = tf.random.stateless_normal([8, 4], seed=[1, 2])


@tf.function
def loss():
    fakes = generator(noise)
    return tf.reduce_mean(tf.square(fakes))
