"""The Keras 2 GAN recipe under Keras 3: the discriminator is frozen after its compile, for
the combined model, and Keras 3 reads `trainable` at every call, so its own train_on_batch
trains nothing."""

import numpy as np
from tensorflow import keras

generator = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6)], name="generator")
discriminator = keras.Sequential(
    [keras.Input((6,)), keras.layers.Dense(1, activation="sigmoid")], name="critic"
)
discriminator.compile(optimizer="adam", loss="binary_crossentropy")
discriminator.trainable = False
z = keras.Input((4,))
gan = keras.Model(z, discriminator(generator(z)))
gan.compile(optimizer="adam", loss="binary_crossentropy")
rng = np.random.default_rng(0)
for _step in range(2):
    noise = rng.normal(size=(8, 4)).astype("float32")
    fake = generator.predict(noise, verbose=0)
    real = rng.normal(size=(8, 6)).astype("float32")
    images = np.concatenate([real, fake])
    labels = np.concatenate([np.ones((8, 1)), np.zeros((8, 1))])
    discriminator.train_on_batch(images, labels)
    gan.train_on_batch(noise, np.ones((8, 1)))
