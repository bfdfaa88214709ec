"""Distillation: the student trains on the teacher's stopped outputs. The teacher is never given
to an optimizer, so although no gradient reaches it, nothing is dead.

    python teacher_student.py      # trains the student for a few steps
"""

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf


def main():
    teacher = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)],
        name="teacher",
    )
    student = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="student")
    optimizer = keras.optimizers.Adam(learning_rate=0.01)

    @tf.function
    def distill_step(x):
        soft_targets = tf.nn.softmax(tf.stop_gradient(teacher(x)))
        with tf.GradientTape() as tape:
            logits = student(x, training=True)
            losses = keras.losses.categorical_crossentropy(soft_targets, logits, from_logits=True)
            loss = tf.reduce_mean(losses)
        gradients = tape.gradient(loss, student.trainable_variables)
        optimizer.apply_gradients(zip(gradients, student.trainable_variables))
        return loss

    rng = np.random.default_rng(0)
    marker = Path(os.environ.get("GRADCHECK_TEST_MARKER", "teacher_student.marker"))
    for step in range(3):
        loss = distill_step(rng.standard_normal((8, 4)).astype("float32"))
        if step == 0:
            marker.write_text("trained after one step\n")
    print(f"distillation loss: {float(loss):.4f}")


if __name__ == "__main__":
    main()
