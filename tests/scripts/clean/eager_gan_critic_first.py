"""An eager GAN that trains its discriminator, then its generator, each with its own tape: the
order of keras-io's WGAN-GP train_step (the fakes made inside the discriminator's tape), with the
losses of TensorFlow's DCGAN tutorial, written as an eager loop.
https://github.com/keras-team/keras-io/blob/master/examples/generative/wgan_gp.py
https://github.com/tensorflow/docs/blob/master/site/en/tutorials/generative/dcgan.ipynb"""

import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

noise_dim = 8
images = tf.random.uniform([8, 16], -1.0, 1.0)
dataset = tf.data.Dataset.from_tensor_slices(images).batch(4)

generator = keras.Sequential(
    [
        keras.Input((noise_dim,)),
        layers.Dense(16, activation="relu"),
        layers.Dense(16, activation="tanh"),
    ]
)
discriminator = keras.Sequential(
    [keras.Input((16,)), layers.Dense(16), layers.LeakyReLU(0.2), layers.Dense(1)]
)
d_optimizer = keras.optimizers.Adam(1e-4)
g_optimizer = keras.optimizers.Adam(1e-4)
cross_entropy = keras.losses.BinaryCrossentropy(from_logits=True)


def train_discriminator(real):
    noise = tf.random.normal([tf.shape(real)[0], noise_dim])
    with tf.GradientTape() as tape:
        fake = generator(noise, training=True)
        real_output = discriminator(real, training=True)
        fake_output = discriminator(fake, training=True)
        d_loss = cross_entropy(tf.ones_like(real_output), real_output) + cross_entropy(
            tf.zeros_like(fake_output), fake_output
        )
    grads = tape.gradient(d_loss, discriminator.trainable_variables)
    d_optimizer.apply_gradients(zip(grads, discriminator.trainable_variables))
    return d_loss


def train_generator(batch_size):
    noise = tf.random.normal([batch_size, noise_dim])
    with tf.GradientTape() as tape:
        fake_output = discriminator(generator(noise, training=True), training=True)
        g_loss = cross_entropy(tf.ones_like(fake_output), fake_output)
    grads = tape.gradient(g_loss, generator.trainable_variables)
    g_optimizer.apply_gradients(zip(grads, generator.trainable_variables))
    return g_loss


for epoch in range(2):
    for real in dataset:
        d_loss = train_discriminator(real)
        g_loss = train_generator(tf.shape(real)[0])
    print(f"epoch {epoch}: d_loss={float(d_loss):.3f} g_loss={float(g_loss):.3f}")
