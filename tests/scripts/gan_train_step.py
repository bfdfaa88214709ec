"""A keras-io style GAN: compile(d_optimizer, g_optimizer, loss_fn) without a compiled loss, a
train_step with one tape per network; the generator step stops the gradient at the fakes, so
the generator never trains (the discriminator's own step trains it)."""

import keras
import tensorflow as tf
from keras import layers

LATENT = 3


def discriminator_loss(gan, real_images, noise):
    fakes = gan.generator(noise)
    images = tf.concat([fakes, real_images], axis=0)
    batch = tf.shape(real_images)[0]
    labels = tf.concat([tf.ones((batch, 1)), tf.zeros((batch, 1))], axis=0)
    return gan.loss_fn(labels, gan.discriminator(images))


def generator_loss(gan, real_images, noise):
    fakes = tf.stop_gradient(gan.generator(noise))
    misleading = tf.zeros((tf.shape(real_images)[0], 1))
    return gan.loss_fn(misleading, gan.discriminator(fakes))


class GAN(keras.Model):
    def __init__(self, discriminator, generator):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn

    def train_step(self, real_images):
        noise = tf.random.normal((tf.shape(real_images)[0], LATENT))
        with tf.GradientTape() as tape:
            d_loss = discriminator_loss(self, real_images, noise)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        with tf.GradientTape() as tape:
            g_loss = generator_loss(self, real_images, noise)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        return {"d_loss": d_loss, "g_loss": g_loss}


discriminator = keras.Sequential(
    # Named layers: the test's own process has made other layers, and Keras numbers unnamed ones.
    [
        keras.Input((4,)),
        layers.Dense(5, activation="relu", name="hidden"),
        layers.Dense(1, name="score"),
    ],
    name="discriminator",
)
generator = keras.Sequential(
    [keras.Input((LATENT,)), layers.Dense(4, name="image")], name="generator"
)
gan = GAN(discriminator, generator)
gan.compile(
    d_optimizer=keras.optimizers.Adam(1e-3),
    g_optimizer=keras.optimizers.Adam(1e-3),
    loss_fn=keras.losses.BinaryCrossentropy(from_logits=True),
)
