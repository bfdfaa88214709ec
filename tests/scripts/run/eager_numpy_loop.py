"""An eager GradientTape loop whose auxiliary head leaves TensorFlow through `.numpy()`: the tape
cannot follow, so that head's variables get no gradient while the rest of the model trains.

    python eager_numpy_loop.py      # trains; Keras warns that gradients do not exist
"""

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf


def main():
    trunk = keras.layers.Dense(8, activation="relu", name="trunk")
    main_head = keras.layers.Dense(1, name="main_head")
    auxiliary_head = keras.layers.Dense(1, name="auxiliary_head")
    trunk.build((None, 4))
    main_head.build((None, 8))
    auxiliary_head.build((None, 8))
    variables = trunk.trainable_variables + main_head.trainable_variables
    variables += auxiliary_head.trainable_variables
    optimizer = keras.optimizers.SGD(learning_rate=0.01)

    rng = np.random.default_rng(0)
    marker = Path(os.environ.get("GRADCHECK_TEST_MARKER", "eager_numpy_loop.marker"))
    for step in range(3):
        x = tf.constant(rng.standard_normal((8, 4)), tf.float32)
        y = tf.constant(rng.standard_normal((8, 1)), tf.float32)
        with tf.GradientTape() as tape:
            features = trunk(x)
            prediction = main_head(features)
            auxiliary = tf.constant(auxiliary_head(features).numpy())
            main_loss = tf.reduce_mean(tf.square(prediction - y))
            loss = main_loss + 0.1 * tf.reduce_mean(tf.square(auxiliary - y))
        gradients = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(gradients, variables))
        if step == 0:
            marker.write_text("trained after one step\n")
    print(f"loss: {float(loss):.4f}")


if __name__ == "__main__":
    main()
