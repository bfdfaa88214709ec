"""faulty_weights_tf1.py fixed with a straight-through estimator.

The forward pass still multiplies by the faulty copy of the weights, but the backward pass
treats `faulty(weights_i) - weights_i` as a constant, so the gradient reaches `weights_i`
unchanged:

    weights = weights_i + tf.stop_gradient(faulty(weights_i) - weights_i)

One stop_gradient is enough; the casts and the XOR inside it no longer matter.

    gradcheck sample_models/faulty_weights_fixed.py --loss loss    # exits 0
"""

# The question's code keeps its long lines.
# ruff: noqa: E501

import math

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

IMAGE_PIXELS = 784
HIDDEN_UNITS = 64
NUM_CLASSES = 10
learning_rate = 0.01


def faulty(weights, fmap):
    """The weights as the faulty hardware sees them: fixed point, bits flipped, back to float."""
    weights_fx = tf.cast(tf.multiply(268435456.0, weights), tf.int32)
    weights_fx_fault = tf.bitwise.bitwise_xor(weights_fx, fmap)
    return tf.multiply(1.0 / 268435456.0, tf.cast(weights_fx_fault, tf.float32))


# The asker's function with the transformation replaced by a straight-through estimator.
# fmt: off
def build_layer(inputs, fmap, nscope,layer_size1,layer_size2, faulty_training):
  with tf.name_scope(nscope):
    if (faulty_training):
      ## trainable weight
      weights_i = tf.Variable(tf.truncated_normal([layer_size1, layer_size2],stddev=1.0 / math.sqrt(float(layer_size1))),name='weights_i')
      ## Straight-through estimator: faulty values forward, identity gradient backward
      weights = weights_i + tf.stop_gradient(faulty(weights_i, fmap) - weights_i)
    else:
      weights = tf.Variable(tf.truncated_normal([layer_size1, layer_size2],stddev=1.0 / math.sqrt(float(layer_size1))),name='weights')


    biases = tf.Variable(tf.zeros([layer_size2]), name='biases')
    hidden = tf.nn.relu(tf.matmul(inputs, weights) + biases)
    return weights,hidden
# fmt: on


def fault_map(rows, cols, num_faults=20, seed=0):
    """A few stuck bits in the fixed-point weights: an int32 mask to XOR them with."""
    rng = np.random.RandomState(seed)
    fmap = np.zeros([rows, cols], dtype=np.int32)
    positions = rng.choice(rows * cols, size=num_faults, replace=False)
    fmap.flat[positions] = 1 << rng.randint(0, 24, size=num_faults)
    return tf.constant(fmap, name="fault_map")


images = tf.placeholder(tf.float32, [None, IMAGE_PIXELS], name="images")
labels = tf.placeholder(tf.int64, [None], name="labels")

_, hidden1 = build_layer(
    images,
    fault_map(IMAGE_PIXELS, HIDDEN_UNITS),
    "hidden1",
    IMAGE_PIXELS,
    HIDDEN_UNITS,
    faulty_training=True,
)

with tf.name_scope("softmax_linear"):
    out_weights = tf.Variable(
        tf.truncated_normal(
            [HIDDEN_UNITS, NUM_CLASSES], stddev=1.0 / math.sqrt(float(HIDDEN_UNITS))
        ),
        name="weights",
    )
    out_biases = tf.Variable(tf.zeros([NUM_CLASSES]), name="biases")
    logits = tf.matmul(hidden1, out_weights) + out_biases

loss = tf.reduce_mean(
    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), name="loss"
)

optimizer = tf.train.GradientDescentOptimizer(learning_rate)
global_step = tf.Variable(0, name="global_step", trainable=False)
train_op = optimizer.minimize(loss, global_step=global_step)


if __name__ == "__main__":
    rng = np.random.RandomState(0)
    weights_i = tf.get_default_graph().get_tensor_by_name("hidden1/weights_i:0")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w0 = sess.run(weights_i)
        for _ in range(20):
            feed = {images: rng.rand(32, IMAGE_PIXELS), labels: rng.randint(0, NUM_CLASSES, 32)}
            _, value = sess.run([train_op, loss], feed)
        w1 = sess.run(weights_i)
    print(f"loss after 20 steps: {value:.4f}")
    print(f"hidden1/weights_i changed: {not np.array_equal(w0, w1)}")  # True: it trains now
