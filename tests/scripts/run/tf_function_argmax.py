"""A custom training loop whose loss compares the predicted class (`tf.argmax`) with the label:
ArgMax has no gradient, so none of the model's variables can train.

    python tf_function_argmax.py --hidden 8 [--steps 3]
    # ValueError: No gradients provided for any variable.
"""

import argparse
import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hidden", type=int, required=True, help="units of the hidden layer")
    parser.add_argument("--steps", type=int, default=3, help="training steps")
    return parser.parse_args()


def build_model(hidden):
    return keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(hidden, activation="relu", name="hidden"),
            keras.layers.Dense(3, name="logits"),
        ]
    )


def main():
    arguments = parse_arguments()
    print(f"hidden units: {arguments.hidden}")
    model = build_model(arguments.hidden)
    optimizer = keras.optimizers.SGD(learning_rate=0.1)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            predicted = tf.cast(tf.argmax(logits, axis=1), tf.float32)
            loss = tf.reduce_mean(tf.square(predicted - y))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    rng = np.random.default_rng(0)
    marker = Path(os.environ.get("GRADCHECK_TEST_MARKER", "tf_function_argmax.marker"))
    for step in range(arguments.steps):
        x = rng.standard_normal((8, 4)).astype("float32")
        y = rng.integers(0, 3, size=8).astype("float32")
        loss = train_step(x, y)
        if step == 0:
            marker.write_text("trained after one step\n")
    print(f"loss: {float(loss):.4f}")


if __name__ == "__main__":
    main()
