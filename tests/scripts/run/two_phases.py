"""Two training phases: a classifier trained by a tf.function step for a few steps, then a
second model trained by an eager tape. The first phase's loop comes around before the second
phase's request is reached: gradcheck checks the first phase's step and tells what it could not
see, the second model, as given to no request of the step checked, naming that request's line.
"""

import keras
import numpy as np
import tensorflow as tf

classifier = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="logits")])
regressor = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, name="value")])
optimizer = keras.optimizers.SGD(0.1)
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 4)).astype("float32")
labels = rng.integers(0, 3, size=8)
targets = rng.standard_normal((8, 1)).astype("float32")


@tf.function
def classifier_step(x, labels):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(
            keras.losses.sparse_categorical_crossentropy(labels, classifier(x), from_logits=True)
        )
    gradients = tape.gradient(loss, classifier.trainable_variables)
    optimizer.apply_gradients(zip(gradients, classifier.trainable_variables))


for _ in range(3):
    classifier_step(x, labels)

second = keras.optimizers.SGD(0.1)
for _ in range(2):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(regressor(x) - targets))
    gradients = tape.gradient(loss, regressor.trainable_variables)
    second.apply_gradients(zip(gradients, regressor.trainable_variables))
