"""A GAN checked loss by loss (`gradcheck gan_losses.py --loss generator_loss`): the generator's
feature-matching loss does not use the discriminator, which discriminator_loss trains."""

import keras
import numpy as np
import tensorflow as tf
from keras import layers

rng = np.random.default_rng(0)
real = tf.constant(rng.standard_normal((8, 4)), tf.float32)
noise = tf.constant(rng.standard_normal((8, 3)), tf.float32)

generator = keras.Sequential(
    [keras.Input((3,)), layers.Dense(4, name="generator_0")], name="generator"
)
discriminator = keras.Sequential(
    [keras.Input((4,)), layers.Dense(5, name="discriminator_0"), layers.Dense(1, name="score")],
    name="discriminator",
)


@tf.function
def generator_loss():
    fakes = generator(noise)
    return tf.reduce_mean(tf.square(tf.reduce_mean(fakes, 0) - tf.reduce_mean(real, 0)))


@tf.function
def discriminator_loss():
    fakes = tf.stop_gradient(generator(noise))
    return tf.reduce_mean(discriminator(fakes)) - tf.reduce_mean(discriminator(real))
