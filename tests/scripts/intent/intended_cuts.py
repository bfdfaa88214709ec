"""Cuts that look intended, and one that does not, each with its own tape in one
tf.function step, whose gradient request lists every network the step touches:

- distill_step: a teacher whose whole output is under tf.stop_gradient (looks intended);
- dqn_step: a DQN target network under tf.stop_gradient (looks intended);
- vq_step: a VQ-VAE whose codebook loss was dropped (the codebook never trains: an error);
- vq_fixed_step: the same with the codebook loss gradcheck advises (the codebook trains);
- d_step / g_step: a GAN; the generator loss does not use the discriminator, which d_step
  trains, and d_step stops the gradient at the fakes, which g_step trains;
- partial_step: a stop_gradient on an intermediate of one network whose earlier layer still
  trains through a skip connection (not intended: an error).
"""

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from keras import layers


def mlp(name, *widths):
    return keras.Sequential(
        [keras.Input((4,))] + [layers.Dense(w, name=f"{name}_{i}") for i, w in enumerate(widths)],
        name=name,
    )


teacher = mlp("teacher", 6, 3)
student = mlp("student", 3)
q_network = mlp("q_network", 5, 2)
target_network = mlp("target_network", 5, 2)
encoder = mlp("encoder", 4)
decoder = keras.Sequential([keras.Input((4,)), layers.Dense(4, name="decoder_0")], name="decoder")
codebook = tf.Variable(tf.random.normal((8, 4), seed=1), name="codebook")
fixed_codebook = tf.Variable(tf.random.normal((8, 4), seed=2), name="fixed_codebook")
generator = mlp("generator", 4)
discriminator = mlp("discriminator", 5, 1)
early = layers.Dense(4, name="early")
middle = layers.Dense(4, name="middle")
late = layers.Dense(1, name="late")
for layer in (early, middle, late):
    layer.build((None, 4))
# What each step's gradient request lists: every network the step touches.
VARIABLES = {
    "distill": student.trainable_variables + teacher.trainable_variables,
    "dqn": q_network.trainable_variables + target_network.trainable_variables,
    "vq": encoder.trainable_variables + [codebook] + decoder.trainable_variables,
    "vq_fixed": encoder.trainable_variables + [fixed_codebook] + decoder.trainable_variables,
    "d": discriminator.trainable_variables + generator.trainable_variables,
    "g": generator.trainable_variables + discriminator.trainable_variables,
    "partial": early.trainable_variables + middle.trainable_variables + late.trainable_variables,
}


def distill_step(x):
    with tf.GradientTape() as tape:
        soft_targets = tf.nn.softmax(tf.stop_gradient(teacher(x)))
        logits = student(x)
        loss = tf.reduce_mean(keras.losses.categorical_crossentropy(soft_targets, logits))
    return tape.gradient(loss, VARIABLES["distill"])


def dqn_step(state, next_state, reward):
    with tf.GradientTape() as tape:
        next_q = tf.stop_gradient(target_network(next_state))
        target = reward + 0.99 * tf.reduce_max(next_q, axis=-1)
        q = tf.reduce_max(q_network(state), axis=-1)
        loss = tf.reduce_mean(tf.square(target - q))
    return tape.gradient(loss, VARIABLES["dqn"])


def vq_step(x):
    with tf.GradientTape() as tape:
        z = encoder(x)
        distances = tf.reduce_sum(tf.square(z[:, None, :] - codebook[None, :, :]), axis=-1)
        codes = tf.one_hot(tf.argmin(distances, axis=-1), 8)
        nearest = tf.matmul(codes, codebook)
        quantized = z + tf.stop_gradient(nearest - z)
        loss = tf.reduce_mean(tf.square(decoder(quantized) - x))
    return tape.gradient(loss, VARIABLES["vq"])


def vq_fixed_step(x):
    """vq_step with the codebook loss gradcheck advises: the codebook trains."""
    with tf.GradientTape() as tape:
        z = encoder(x)
        distances = tf.reduce_sum(tf.square(z[:, None, :] - fixed_codebook[None, :, :]), axis=-1)
        codes = tf.one_hot(tf.argmin(distances, axis=-1), 8)
        nearest = tf.matmul(codes, fixed_codebook)
        quantized = z + tf.stop_gradient(nearest - z)
        codebook_loss = tf.reduce_mean((tf.stop_gradient(z) - nearest) ** 2)
        loss = tf.reduce_mean(tf.square(decoder(quantized) - x)) + codebook_loss
    return tape.gradient(loss, VARIABLES["vq_fixed"])


def d_step(real, noise):
    with tf.GradientTape() as tape:
        fakes = tf.stop_gradient(generator(noise))
        loss = tf.reduce_mean(discriminator(fakes)) - tf.reduce_mean(discriminator(real))
    return tape.gradient(loss, VARIABLES["d"])


def g_step(real, noise):
    with tf.GradientTape() as tape:
        fakes = generator(noise)
        loss = tf.reduce_mean(tf.square(tf.reduce_mean(fakes, 0) - tf.reduce_mean(real, 0)))
    return tape.gradient(loss, VARIABLES["g"])


def partial_step(x):
    with tf.GradientTape() as tape:
        h = early(x)
        features = tf.stop_gradient(middle(h))
        loss = tf.reduce_mean(late(features + h))
    return tape.gradient(loss, VARIABLES["partial"])


@tf.function
def train_step(x, noise, next_state, reward):
    """Every gradient in one step: `gradcheck run` reads them all before the first update."""
    return {
        "distill": distill_step(x),
        "dqn": dqn_step(x, next_state, reward),
        "vq": vq_step(x),
        "vq_fixed": vq_fixed_step(x),
        "d": d_step(x, noise),
        "g": g_step(x, noise),
        "partial": partial_step(x),
    }


def main():
    rng = np.random.default_rng(0)

    def batch():
        return rng.standard_normal((8, 4)).astype("float32")

    steps = train_step(batch(), batch(), batch(), batch()[:, 0])
    for step, gradients in steps.items():
        pairs = [(g, v) for g, v in zip(gradients, VARIABLES[step]) if g is not None]
        keras.optimizers.SGD(0.01).apply_gradients(pairs)
    Path(os.environ.get("GRADCHECK_TEST_MARKER", "intended_cuts.marker")).write_text("x")


if __name__ == "__main__":
    main()
