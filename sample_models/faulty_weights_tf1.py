"""The Stack Overflow "stop_gradient stops my weights from training" script, made runnable.

A user wanted the forward pass to multiply by a *faulty* copy of the weight matrix (scaled to
fixed point, cast to int32, XOR-ed with a fault map, cast back) while the backward pass still
updated the original `weights_i`. `build_layer` below is their function as posted. Every step is
wrapped in `tf.stop_gradient`, and the casts to int32 and the XOR carry no gradient anyway, so
`hidden1/weights_i` never trains; only the biases and the output layer do.

    gradcheck sample_models/faulty_weights_tf1.py --loss loss      # exits 1

The fix is in faulty_weights_fixed.py.
"""

# The question's code is kept as posted: its long lines and unused results are the point.
# ruff: noqa: E501, F841

import math

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

IMAGE_PIXELS = 784
HIDDEN_UNITS = 64
NUM_CLASSES = 10
learning_rate = 0.01


# The asker's function exactly as posted, so reports point at lines they recognise.
# fmt: off
def build_layer(inputs, fmap, nscope,layer_size1,layer_size2, faulty_training):
  with tf.name_scope(nscope):
    if (faulty_training):
      ## trainable weight
      weights_i = tf.Variable(tf.truncated_normal([layer_size1, layer_size2],stddev=1.0 / math.sqrt(float(layer_size1))),name='weights_i')
      ## Operations on weight whose gradient should not be computed during backpropagation
      weights_fx_t = tf.multiply(268435456.0,weights_i)
      weight_fx_t = tf.stop_gradient(weights_fx_t)
      weights_fx = tf.cast(weights_fx_t,tf.int32)
      weight_fx = tf.stop_gradient(weights_fx)
      weights_fx_fault = tf.bitwise.bitwise_xor(weights_fx,fmap)
      weight_fx_fault = tf.stop_gradient(weights_fx_fault)
      weights_fl = tf.cast(weights_fx_fault, tf.float32)
      weight_fl = tf.stop_gradient(weights_fl)
      weights = tf.stop_gradient(tf.multiply((1.0/268435456.0),weights_fl))
      ##### end transformation
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

# A plain linear output layer, as in the TensorFlow MNIST tutorial the question builds on.
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
    # Train a few steps on random "images" and watch which variables move.
    rng = np.random.RandomState(0)
    weights_i = tf.get_default_graph().get_tensor_by_name("hidden1/weights_i:0")
    biases = tf.get_default_graph().get_tensor_by_name("hidden1/biases:0")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w0, b0 = sess.run([weights_i, biases])
        for _ in range(20):
            feed = {images: rng.rand(32, IMAGE_PIXELS), labels: rng.randint(0, NUM_CLASSES, 32)}
            _, value = sess.run([train_op, loss], feed)
        w1, b1 = sess.run([weights_i, biases])
    print(f"loss after 20 steps: {value:.4f}")
    print(f"hidden1/weights_i changed: {not np.array_equal(w0, w1)}")  # False: it never trains
    print(f"hidden1/biases changed:    {not np.array_equal(b0, b1)}")  # True
