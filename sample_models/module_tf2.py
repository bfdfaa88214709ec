"""A small TF2 classifier (a `tf.Module`) with 8-bit quantized output weights.

The output kernel is quantized with `tf.round` in the forward pass. Rounding has no gradient, so
`output/kernel` never trains (the fix is a straight-through estimator, as in
faulty_weights_fixed.py). `aux/kernel` belongs to an auxiliary head that the loss never calls.
Everything else trains.

    gradcheck sample_models/module_tf2.py --loss loss              # exits 1
"""

import numpy as np
import tensorflow as tf

NUM_FEATURES = 16
HIDDEN_UNITS = 32
NUM_CLASSES = 4


def quantize(weights, bits=8):
    """Round to signed `bits`-bit fixed point in [-1, 1]."""
    levels = 2.0 ** (bits - 1) - 1
    return tf.round(tf.clip_by_value(weights, -1.0, 1.0) * levels) / levels


def initial_value(rng, shape):
    return rng.normal(scale=1.0 / np.sqrt(shape[0]), size=shape).astype(np.float32)


class QuantizedClassifier(tf.Module):
    def __init__(self, seed=0):
        super().__init__(name="quantized_classifier")
        rng = np.random.default_rng(seed)
        self.hidden_kernel = tf.Variable(
            initial_value(rng, [NUM_FEATURES, HIDDEN_UNITS]), name="hidden/kernel"
        )
        self.hidden_bias = tf.Variable(tf.zeros([HIDDEN_UNITS]), name="hidden/bias")
        self.output_kernel = tf.Variable(
            initial_value(rng, [HIDDEN_UNITS, NUM_CLASSES]), name="output/kernel"
        )
        self.output_bias = tf.Variable(tf.zeros([NUM_CLASSES]), name="output/bias")
        # An auxiliary head meant for a distillation loss that was never written.
        self.aux_kernel = tf.Variable(
            initial_value(rng, [HIDDEN_UNITS, NUM_CLASSES]), name="aux/kernel"
        )

    def __call__(self, features):
        hidden = tf.nn.relu(tf.matmul(features, self.hidden_kernel) + self.hidden_bias)
        # Bug: tf.round has no gradient, so output/kernel gets None.
        # Fix: w + tf.stop_gradient(quantize(w) - w)
        return tf.matmul(hidden, quantize(self.output_kernel)) + self.output_bias


model = QuantizedClassifier()


@tf.function(
    input_signature=[
        tf.TensorSpec([None, NUM_FEATURES], tf.float32, name="features"),
        tf.TensorSpec([None], tf.int32, name="labels"),
    ]
)
def loss(features, labels):
    logits = model(features)
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    )


if __name__ == "__main__":
    rng = np.random.default_rng(1)
    features = tf.constant(rng.normal(size=[64, NUM_FEATURES]), tf.float32)
    labels = tf.constant(rng.integers(0, NUM_CLASSES, size=[64]), tf.int32)
    with tf.GradientTape() as tape:
        value = loss(features, labels)
    gradients = tape.gradient(value, model.trainable_variables)
    print(f"loss: {float(value):.4f}")
    for variable, gradient in zip(model.trainable_variables, gradients, strict=True):
        print(f"{variable.name:20s} gradient: {'None' if gradient is None else 'yes'}")
