import os
from pathlib import Path

import keras
import tensorflow as tf


def build_model():
    return keras.Sequential([keras.layers.Dense(1)])


def compute_loss(logits, labels):
    return tf.reduce_mean(tf.square(logits - labels))


def main():
    Path(os.environ["GRADCHECK_TEST_MARKER"]).write_text("main ran")
    model = build_model()
    model.compile(optimizer="sgd", loss="mse")
    model.fit(tf.ones([4, 3]), tf.ones([4, 1]), epochs=1, verbose=0)
