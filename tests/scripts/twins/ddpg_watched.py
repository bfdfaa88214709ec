"""The DDPG step of ddpg_step.py, checked in the user's own process by watch()."""

import tensorflow as tf

import gradcheck_cli

watching = gradcheck_cli.watch()

from ddpg_step import train_step  # noqa: E402  (built after watch(), as a notebook would)

train_step(
    tf.random.normal([4, 3]),
    tf.random.normal([4, 2]),
    tf.random.normal([4, 1]),
    tf.random.normal([4, 3]),
)
print("checked:", watching.checked)
