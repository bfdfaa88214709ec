"""DoReFa-style quantizers in a graph of their own (not the default one), trained in a Session.

`quantize` rounds its input to k bits. Only its first use gives Round the straight-through
gradient (`{"Round": "Identity"}`); the other two key the override map by the wrong op type
(`"round"`, `"Floor"`), so their Round keeps TensorFlow's gradient: None. A DANN-style gradient
reversal overrides Identity with a gradient the script registers itself. `w_straight`,
`w_reversed` and `head` train; `w_lowercase` and `w_floor` never do.

    gradcheck tests/scripts/override_quantizers.py --loss loss
    gradcheck run tests/scripts/override_quantizers.py
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import tensorflow as tf

graph = tf.Graph()


@tf.RegisterGradient("OverrideQuantizersFlip")
def _flip_gradient(op: tf.Operation, grad: tf.Tensor) -> list[tf.Tensor]:
    return [tf.negative(grad)]


def quantize(x: tf.Tensor, bits: int, override: dict[str, str]) -> tf.Tensor:
    levels = float(2**bits - 1)
    with graph.gradient_override_map(override):
        return tf.round(x * levels) / levels


with graph.as_default():
    images = tf.compat.v1.placeholder(tf.float32, [None, 6], name="images")
    w_straight = tf.compat.v1.get_variable("w_straight", [6, 4])
    w_lowercase = tf.compat.v1.get_variable("w_lowercase", [6, 4])
    w_floor = tf.compat.v1.get_variable("w_floor", [6, 4])
    w_reversed = tf.compat.v1.get_variable("w_reversed", [6, 4])
    head = tf.compat.v1.get_variable("head", [4, 1])
    with graph.gradient_override_map({"Identity": "OverrideQuantizersFlip"}):
        reversed_features = tf.identity(tf.matmul(images, w_reversed))
    features = (
        quantize(tf.matmul(images, w_straight), 2, {"Round": "Identity"})
        + quantize(tf.matmul(images, w_lowercase), 2, {"round": "Identity"})
        + quantize(tf.matmul(images, w_floor), 2, {"Floor": "Identity"})
        + reversed_features
    )
    loss = tf.reduce_mean(tf.square(tf.matmul(features, head)), name="loss")
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    initialize = tf.compat.v1.global_variables_initializer()


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    marker = Path(os.environ.get("GRADCHECK_TEST_MARKER", "override_quantizers.marker"))
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(initialize)
        for step in range(3):
            batch = rng.standard_normal((8, 6)).astype("float32")
            _, value = session.run([train_op, loss], {images: batch})
            if step == 0:
                marker.write_text("trained after one step\n")
    print(f"loss: {value:.4f}")
