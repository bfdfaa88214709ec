"""TensorFlow's pix2pix tutorial: a U-Net generator and a PatchGAN discriminator trained by one
tf.function step with two tapes, small: 16x16 random images, fewer and narrower layers.
https://github.com/tensorflow/docs/blob/master/site/en/tutorials/generative/pix2pix.ipynb"""

import tensorflow as tf

OUTPUT_CHANNELS = 3
SIZE = 16
inp = tf.random.uniform([SIZE, SIZE, 3], -1.0, 1.0)
re = tf.random.uniform([SIZE, SIZE, 3], -1.0, 1.0)
train_dataset = tf.data.Dataset.from_tensors((inp, re)).batch(1)


def downsample(filters, size, apply_batchnorm=True):
    initializer = tf.random_normal_initializer(0.0, 0.02)
    result = tf.keras.Sequential()
    result.add(
        tf.keras.layers.Conv2D(
            filters,
            size,
            strides=2,
            padding="same",
            kernel_initializer=initializer,
            use_bias=False,
        )
    )
    if apply_batchnorm:
        result.add(tf.keras.layers.BatchNormalization())
    result.add(tf.keras.layers.LeakyReLU())
    return result


down_model = downsample(3, 4)
down_result = down_model(tf.expand_dims(inp, 0))


def upsample(filters, size, apply_dropout=False):
    initializer = tf.random_normal_initializer(0.0, 0.02)
    result = tf.keras.Sequential()
    result.add(
        tf.keras.layers.Conv2DTranspose(
            filters,
            size,
            strides=2,
            padding="same",
            kernel_initializer=initializer,
            use_bias=False,
        )
    )
    result.add(tf.keras.layers.BatchNormalization())
    if apply_dropout:
        result.add(tf.keras.layers.Dropout(0.5))
    result.add(tf.keras.layers.ReLU())
    return result


up_model = upsample(3, 4)
up_result = up_model(down_result)


def Generator():
    inputs = tf.keras.layers.Input(shape=[SIZE, SIZE, 3])
    down_stack = [
        downsample(8, 4, apply_batchnorm=False),  # 8x8
        downsample(16, 4),  # 4x4
        downsample(16, 4),  # 2x2
        downsample(16, 4),  # 1x1
    ]
    up_stack = [
        upsample(16, 4, apply_dropout=True),  # 2x2
        upsample(16, 4),  # 4x4
        upsample(8, 4),  # 8x8
    ]
    initializer = tf.random_normal_initializer(0.0, 0.02)
    last = tf.keras.layers.Conv2DTranspose(
        OUTPUT_CHANNELS,
        4,
        strides=2,
        padding="same",
        kernel_initializer=initializer,
        activation="tanh",
    )
    x = inputs
    skips = []
    for down in down_stack:
        x = down(x)
        skips.append(x)
    skips = reversed(skips[:-1])
    for up, skip in zip(up_stack, skips):
        x = up(x)
        x = tf.keras.layers.Concatenate()([x, skip])
    x = last(x)
    return tf.keras.Model(inputs=inputs, outputs=x)


generator = Generator()
gen_output = generator(inp[tf.newaxis, ...], training=False)

LAMBDA = 100
loss_object = tf.keras.losses.BinaryCrossentropy(from_logits=True)


def generator_loss(disc_generated_output, gen_output, target):
    gan_loss = loss_object(tf.ones_like(disc_generated_output), disc_generated_output)
    l1_loss = tf.reduce_mean(tf.abs(target - gen_output))
    total_gen_loss = gan_loss + (LAMBDA * l1_loss)
    return total_gen_loss, gan_loss, l1_loss


def Discriminator():
    initializer = tf.random_normal_initializer(0.0, 0.02)
    inp = tf.keras.layers.Input(shape=[SIZE, SIZE, 3], name="input_image")
    tar = tf.keras.layers.Input(shape=[SIZE, SIZE, 3], name="target_image")
    x = tf.keras.layers.concatenate([inp, tar])
    down1 = downsample(8, 4, False)(x)
    down2 = downsample(16, 4)(down1)
    zero_pad1 = tf.keras.layers.ZeroPadding2D()(down2)
    conv = tf.keras.layers.Conv2D(16, 4, strides=1, kernel_initializer=initializer, use_bias=False)(
        zero_pad1
    )
    batchnorm1 = tf.keras.layers.BatchNormalization()(conv)
    leaky_relu = tf.keras.layers.LeakyReLU()(batchnorm1)
    zero_pad2 = tf.keras.layers.ZeroPadding2D()(leaky_relu)
    last = tf.keras.layers.Conv2D(1, 4, strides=1, kernel_initializer=initializer)(zero_pad2)
    return tf.keras.Model(inputs=[inp, tar], outputs=last)


discriminator = Discriminator()
disc_out = discriminator([inp[tf.newaxis, ...], gen_output], training=False)


def discriminator_loss(disc_real_output, disc_generated_output):
    real_loss = loss_object(tf.ones_like(disc_real_output), disc_real_output)
    generated_loss = loss_object(tf.zeros_like(disc_generated_output), disc_generated_output)
    total_disc_loss = real_loss + generated_loss
    return total_disc_loss


generator_optimizer = tf.keras.optimizers.Adam(2e-4, beta_1=0.5)
discriminator_optimizer = tf.keras.optimizers.Adam(2e-4, beta_1=0.5)


@tf.function
def train_step(input_image, target, step):
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        gen_output = generator(input_image, training=True)
        disc_real_output = discriminator([input_image, target], training=True)
        disc_generated_output = discriminator([input_image, gen_output], training=True)
        gen_total_loss, gen_gan_loss, gen_l1_loss = generator_loss(
            disc_generated_output, gen_output, target
        )
        disc_loss = discriminator_loss(disc_real_output, disc_generated_output)

    generator_gradients = gen_tape.gradient(gen_total_loss, generator.trainable_variables)
    discriminator_gradients = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
    generator_optimizer.apply_gradients(zip(generator_gradients, generator.trainable_variables))
    discriminator_optimizer.apply_gradients(
        zip(discriminator_gradients, discriminator.trainable_variables)
    )


def fit(train_ds, steps):
    for step, (input_image, target) in train_ds.repeat().take(steps).enumerate():
        train_step(input_image, target, step)


fit(train_dataset, steps=1)
