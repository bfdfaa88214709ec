"""A WGAN-GP training step on synthetic data: five critic steps per generator step, each with
a gradient penalty computed by a nested `tf.GradientTape` on interpolated samples, all in one
`tf.function`. Small, CPU-only, no data files; every variable trains (gradcheck exits 0)."""

import keras
import tensorflow as tf
from keras import layers

LATENT_DIM = 16
SIZE = 16
BATCH = 8
CRITIC_STEPS = 5
GP_WEIGHT = 10.0

generator = keras.Sequential(
    [
        keras.Input((LATENT_DIM,)),
        layers.Dense(4 * 4 * 32),
        layers.LeakyReLU(0.2),
        layers.Reshape((4, 4, 32)),
        layers.Conv2DTranspose(32, 4, strides=2, padding="same"),
        layers.BatchNormalization(),
        layers.LeakyReLU(0.2),
        layers.Conv2DTranspose(16, 4, strides=2, padding="same"),
        layers.BatchNormalization(),
        layers.LeakyReLU(0.2),
        layers.Conv2D(1, 3, padding="same", activation="tanh"),
    ],
    name="generator",
)
critic = keras.Sequential(
    [
        keras.Input((SIZE, SIZE, 1)),
        layers.Conv2D(16, 4, strides=2, padding="same"),
        layers.LeakyReLU(0.2),
        layers.Conv2D(32, 4, strides=2, padding="same"),
        layers.LeakyReLU(0.2),
        layers.Flatten(),
        layers.Dense(1),
    ],
    name="critic",
)
critic_optimizer = keras.optimizers.Adam(1e-4, beta_1=0.5, beta_2=0.9)
generator_optimizer = keras.optimizers.Adam(1e-4, beta_1=0.5, beta_2=0.9)


def gradient_penalty(real, fake):
    alpha = tf.random.uniform([BATCH, 1, 1, 1])
    interpolated = real + alpha * (fake - real)
    with tf.GradientTape() as penalty_tape:
        penalty_tape.watch(interpolated)
        score = critic(interpolated, training=True)
    gradients = penalty_tape.gradient(score, [interpolated])[0]
    norm = tf.sqrt(tf.reduce_sum(tf.square(gradients), axis=[1, 2, 3]) + 1e-12)
    return tf.reduce_mean((norm - 1.0) ** 2)


@tf.function
def train_step(real):
    for _ in range(CRITIC_STEPS):
        noise = tf.random.normal([BATCH, LATENT_DIM])
        with tf.GradientTape() as tape:
            fake = generator(noise, training=True)
            critic_loss = (
                tf.reduce_mean(critic(fake, training=True))
                - tf.reduce_mean(critic(real, training=True))
                + GP_WEIGHT * gradient_penalty(real, fake)
            )
        gradients = tape.gradient(critic_loss, critic.trainable_variables)
        critic_optimizer.apply_gradients(zip(gradients, critic.trainable_variables))
    noise = tf.random.normal([BATCH, LATENT_DIM])
    with tf.GradientTape() as tape:
        generator_loss = -tf.reduce_mean(critic(generator(noise, training=True), training=True))
    gradients = tape.gradient(generator_loss, generator.trainable_variables)
    generator_optimizer.apply_gradients(zip(gradients, generator.trainable_variables))
    return critic_loss, generator_loss


if __name__ == "__main__":
    images = tf.random.uniform([BATCH, SIZE, SIZE, 1], -1.0, 1.0, seed=3)
    for step in range(2):
        critic_value, generator_value = train_step(images)
        print(
            f"step {step}: critic {float(critic_value):.3f}, generator {float(generator_value):.3f}"
        )
