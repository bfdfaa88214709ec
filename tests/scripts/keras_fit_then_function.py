"""Runs a Keras model at import (a predict, which asks for no gradient), then gives a tf.function
loss; records its pid and its parent's.

The test names the record file in GRADCHECK_TEST_PIDS.
"""

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

with Path(os.environ["GRADCHECK_TEST_PIDS"]).open("a") as pids:
    pids.write(f"{os.getpid()} {os.getppid()}\n")

rng = np.random.default_rng(0)
features = rng.normal(size=(16, 3)).astype("float32")
targets = rng.normal(size=(16, 1)).astype("float32")
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.predict(features, verbose=0)
unused = tf.Variable(1.0, name="unused")


@tf.function
def loss():
    return tf.reduce_mean(tf.square(model(features) - targets)) + tf.stop_gradient(unused)
