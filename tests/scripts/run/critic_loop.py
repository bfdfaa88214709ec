"""A WGAN-style step whose critic request is reached three times in one trace (a d_steps loop):
the optimizer's variables the first pass creates do not make the later passes new requests."""

import keras
import tensorflow as tf
from keras import layers

generator = keras.Sequential(
    [keras.Input((4,)), layers.Dense(8), layers.Dense(2)], name="generator"
)
critic = keras.Sequential([keras.Input((2,)), layers.Dense(8), layers.Dense(1)], name="critic")
d_opt = keras.optimizers.Adam(1e-3)
g_opt = keras.optimizers.Adam(1e-3)
D_STEPS = 3


@tf.function
def train_step(real):
    for _ in range(D_STEPS):
        noise = tf.random.normal([8, 4])
        with tf.GradientTape() as tape:
            fake = generator(noise)
            d_loss = tf.reduce_mean(critic(fake)) - tf.reduce_mean(critic(real))
        grads = tape.gradient(d_loss, critic.trainable_variables)
        d_opt.apply_gradients(zip(grads, critic.trainable_variables))
    noise = tf.random.normal([8, 4])
    with tf.GradientTape() as tape:
        g_loss = -tf.reduce_mean(critic(generator(noise)))
    grads = tape.gradient(g_loss, generator.trainable_variables)
    g_opt.apply_gradients(zip(grads, generator.trainable_variables))


real = tf.random.normal([8, 2])
for _step in range(2):
    train_step(real)
