"""An eager loop that updates its weights by hand with assign_sub; `w2` goes through NumPy."""

import os
import sys
from pathlib import Path

import tensorflow as tf

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
w1 = tf.Variable(tf.ones((3, 2)), name="w1")
w2 = tf.Variable(tf.ones((3, 1)), name="w2")
x = tf.random.normal((4, 3))
for step in range(steps):
    with tf.GradientTape() as tape:
        direct = tf.reduce_sum(x @ w1)
        through_numpy = tf.constant((x @ w2).numpy())
        loss = direct + tf.reduce_sum(through_numpy)
    gradients = tape.gradient(loss, [w1, w2])
    for variable, gradient in zip([w1, w2], gradients):
        if gradient is not None:
            variable.assign_sub(0.1 * gradient)
    Path(os.environ.get("GRADCHECK_TEST_MARKER", "manual_update.marker")).write_text(str(step))
    print(f"step {step} done", flush=True)
