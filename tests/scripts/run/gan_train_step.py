"""The keras.io GAN pattern with one mistake: the generator step scores the generated samples
through `tf.stop_gradient`, so the generator gets no gradient at all.

TensorFlow only says so when the step is traced, at the generator's `apply_gradients`:

    python gan_train_step.py      # ValueError: No gradients provided for any variable.
"""

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

LATENT_DIM = 4
SAMPLE_DIM = 6


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn

    def train_step(self, real_samples):
        batch_size = tf.shape(real_samples)[0]
        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        generated_samples = self.generator(random_latent_vectors)
        combined_samples = tf.concat([generated_samples, real_samples], axis=0)
        labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
        labels += 0.05 * tf.random.uniform(tf.shape(labels))

        with tf.GradientTape() as tape:
            predictions = self.discriminator(combined_samples)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))

        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        misleading_labels = tf.zeros((batch_size, 1))
        with tf.GradientTape() as tape:
            fake_samples = tf.stop_gradient(self.generator(random_latent_vectors))
            predictions = self.discriminator(fake_samples)
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        return {"d_loss": d_loss, "g_loss": g_loss}


def main():
    discriminator = keras.Sequential(name="discriminator")
    discriminator.add(keras.Input((SAMPLE_DIM,)))
    discriminator.add(keras.layers.Dense(8, activation="relu"))
    discriminator.add(keras.layers.Dense(1))
    generator = keras.Sequential(name="generator")
    generator.add(keras.Input((LATENT_DIM,)))
    generator.add(keras.layers.Dense(8, activation="relu"))
    generator.add(keras.layers.Dense(SAMPLE_DIM))
    gan = GAN(discriminator=discriminator, generator=generator, latent_dim=LATENT_DIM)
    gan.compile(
        d_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
        g_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
        loss_fn=keras.losses.BinaryCrossentropy(from_logits=True),
    )
    real_samples = np.random.default_rng(0).standard_normal((16, SAMPLE_DIM)).astype("float32")
    marker = Path(os.environ.get("GRADCHECK_TEST_MARKER", "gan_train_step.marker"))
    mark_first_step = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: batch == 0 and marker.write_text("trained\n")
    )
    gan.fit(real_samples, batch_size=8, epochs=1, verbose=0, callbacks=[mark_first_step])
    print("trained one epoch")


if __name__ == "__main__":
    main()
