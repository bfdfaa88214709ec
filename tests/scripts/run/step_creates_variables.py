"""A tf.Module whose tf.function step creates its variables on the first call (the "functions that
create state" idiom: create once, guarded by `if self.w is None`) and trains them with a tape in
the same function. `q` only feeds tf.round, so it gets no gradient: each variable must be told by
the line inside the step that created it, not by the line that called the step.
"""

import os
from pathlib import Path

import tensorflow as tf


class Trainer(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = None
        self.optimizer = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def step(self, x, y):
        if self.w is None:
            self.w = tf.Variable(tf.random.normal([3, 1]), name="w")
            self.b = tf.Variable(tf.zeros([1]), name="b")
            self.q = tf.Variable(0.4, name="q")
        with tf.GradientTape() as tape:
            prediction = tf.matmul(x, self.w) + self.b + tf.round(self.q)
            loss = tf.reduce_mean((prediction - y) ** 2)
        variables = [self.w, self.b, self.q]
        gradients = tape.gradient(loss, variables)
        pairs = [(g, v) for g, v in zip(gradients, variables) if g is not None]
        self.optimizer.apply_gradients(pairs)
        return loss


trainer = Trainer()
x = tf.random.normal([4, 3])
y = tf.random.normal([4, 1])
marker = Path(os.environ.get("GRADCHECK_TEST_MARKER", "step_creates_variables.marker"))
for step in range(2):
    trainer.step(x, y)
    if step == 0:
        marker.write_text("trained after one step\n")
