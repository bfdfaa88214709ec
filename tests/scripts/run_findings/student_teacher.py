"""A student distilled from a teacher in a tf.function step: the teacher is never given to the
optimizer (GC207), and the step's variable list includes a non-trainable counter (GC208)."""

import os
from pathlib import Path

import tensorflow as tf


class Net(tf.Module):
    def __init__(self, name):
        super().__init__(name=name)
        self.w = tf.Variable(tf.random.normal((3, 2)), name="w")
        self.b = tf.Variable(tf.zeros((2,)), name="b")

    def __call__(self, x):
        return x @ self.w + self.b


def main():
    teacher = Net("teacher")
    student = Net("student")
    steps = tf.Variable(0.0, trainable=False, name="steps")
    optimizer = tf.keras.optimizers.SGD(0.1)
    variables = [student.w, student.b, steps]

    @tf.function
    def train_step(x):
        with tf.GradientTape() as tape:
            target = tf.stop_gradient(teacher(x))
            loss = tf.reduce_mean(tf.square(student(x) - target))
        gradients = tape.gradient(loss, variables)
        optimizer.apply_gradients((g, v) for g, v in zip(gradients, variables) if g is not None)
        return loss

    for _ in range(3):
        train_step(tf.random.normal((4, 3)))
        Path(os.environ.get("GRADCHECK_TEST_MARKER", "student_teacher.marker")).write_text("x")


if __name__ == "__main__":
    main()
