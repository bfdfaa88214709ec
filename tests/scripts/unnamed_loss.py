import os
from pathlib import Path

import tensorflow as tf

weight = tf.Variable([1.0, 2.0], name="weight")
unused = tf.Variable([3.0], name="unused")


def total():
    return tf.reduce_sum(weight * 2.0)


def main():
    Path(os.environ["GRADCHECK_TEST_MARKER"]).write_text("main ran")
