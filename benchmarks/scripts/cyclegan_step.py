"""A CycleGAN training step on synthetic images: two generators (X -> Y, Y -> X) and two
discriminators, each trained by its own `tf.GradientTape`, all four in one `tf.function`.
Small, CPU-only, no data files; every variable trains (gradcheck exits 0)."""

import keras
import tensorflow as tf
from keras import layers

SIZE = 32
CHANNELS = 3
LAMBDA_CYCLE = 10.0
LAMBDA_IDENTITY = 5.0


def residual_block(x, filters):
    y = layers.Conv2D(filters, 3, padding="same")(x)
    y = layers.GroupNormalization(groups=-1)(y)
    y = layers.ReLU()(y)
    y = layers.Conv2D(filters, 3, padding="same")(y)
    y = layers.GroupNormalization(groups=-1)(y)
    return layers.Add()([x, y])


def make_generator(name):
    inputs = keras.Input((SIZE, SIZE, CHANNELS))
    x = layers.Conv2D(16, 7, padding="same")(inputs)
    x = layers.GroupNormalization(groups=-1)(x)
    x = layers.ReLU()(x)
    x = layers.Conv2D(32, 3, strides=2, padding="same")(x)
    x = layers.GroupNormalization(groups=-1)(x)
    x = layers.ReLU()(x)
    for _ in range(3):
        x = residual_block(x, 32)
    x = layers.Conv2DTranspose(16, 3, strides=2, padding="same")(x)
    x = layers.GroupNormalization(groups=-1)(x)
    x = layers.ReLU()(x)
    outputs = layers.Conv2D(CHANNELS, 7, padding="same", activation="tanh")(x)
    return keras.Model(inputs, outputs, name=name)


def make_discriminator(name):
    inputs = keras.Input((SIZE, SIZE, CHANNELS))
    x = layers.Conv2D(16, 4, strides=2, padding="same")(inputs)
    x = layers.LeakyReLU(0.2)(x)
    x = layers.Conv2D(32, 4, strides=2, padding="same")(x)
    x = layers.GroupNormalization(groups=-1)(x)
    x = layers.LeakyReLU(0.2)(x)
    outputs = layers.Conv2D(1, 4, padding="same")(x)
    return keras.Model(inputs, outputs, name=name)


gen_g = make_generator("generator_g")  # X -> Y
gen_f = make_generator("generator_f")  # Y -> X
disc_x = make_discriminator("discriminator_x")
disc_y = make_discriminator("discriminator_y")
optimizers = {name: keras.optimizers.Adam(2e-4, beta_1=0.5) for name in ("g", "f", "dx", "dy")}
mse = keras.losses.MeanSquaredError()


def generator_loss(fake_score):
    return mse(tf.ones_like(fake_score), fake_score)


def discriminator_loss(real_score, fake_score):
    return 0.5 * (
        mse(tf.ones_like(real_score), real_score) + mse(tf.zeros_like(fake_score), fake_score)
    )


@tf.function
def train_step(real_x, real_y):
    with (
        tf.GradientTape() as tape_g,
        tf.GradientTape() as tape_f,
        tf.GradientTape() as tape_dx,
        tf.GradientTape() as tape_dy,
    ):
        fake_y = gen_g(real_x, training=True)
        cycled_x = gen_f(fake_y, training=True)
        fake_x = gen_f(real_y, training=True)
        cycled_y = gen_g(fake_x, training=True)
        same_x = gen_f(real_x, training=True)
        same_y = gen_g(real_y, training=True)

        score_real_x = disc_x(real_x, training=True)
        score_real_y = disc_y(real_y, training=True)
        score_fake_x = disc_x(fake_x, training=True)
        score_fake_y = disc_y(fake_y, training=True)

        cycle = LAMBDA_CYCLE * (
            tf.reduce_mean(tf.abs(real_x - cycled_x)) + tf.reduce_mean(tf.abs(real_y - cycled_y))
        )
        loss_g = (
            generator_loss(score_fake_y)
            + cycle
            + LAMBDA_IDENTITY * tf.reduce_mean(tf.abs(real_y - same_y))
        )
        loss_f = (
            generator_loss(score_fake_x)
            + cycle
            + LAMBDA_IDENTITY * tf.reduce_mean(tf.abs(real_x - same_x))
        )
        loss_dx = discriminator_loss(score_real_x, score_fake_x)
        loss_dy = discriminator_loss(score_real_y, score_fake_y)

    gradients_g = tape_g.gradient(loss_g, gen_g.trainable_variables)
    gradients_f = tape_f.gradient(loss_f, gen_f.trainable_variables)
    gradients_dx = tape_dx.gradient(loss_dx, disc_x.trainable_variables)
    gradients_dy = tape_dy.gradient(loss_dy, disc_y.trainable_variables)
    optimizers["g"].apply_gradients(zip(gradients_g, gen_g.trainable_variables))
    optimizers["f"].apply_gradients(zip(gradients_f, gen_f.trainable_variables))
    optimizers["dx"].apply_gradients(zip(gradients_dx, disc_x.trainable_variables))
    optimizers["dy"].apply_gradients(zip(gradients_dy, disc_y.trainable_variables))
    return loss_g, loss_f, loss_dx, loss_dy


if __name__ == "__main__":
    images_x = tf.random.uniform([4, SIZE, SIZE, CHANNELS], -1.0, 1.0, seed=1)
    images_y = tf.random.uniform([4, SIZE, SIZE, CHANNELS], -1.0, 1.0, seed=2)
    for step in range(2):
        losses = train_step(images_x, images_y)
        print(f"step {step}: " + ", ".join(f"{float(v):.3f}" for v in losses))
