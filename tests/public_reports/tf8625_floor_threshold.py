"""ValueError: No gradients provided for any variable, check your graph for ops that do not support gradients
https://github.com/tensorflow/tensorflow/issues/8625

The user thresholds a sigmoid output with tf.floor (y_pred = floor(y_prob)) and builds
the L1 loss on the thresholded prediction, then minimizes it with GradientDescentOptimizer
(TF1 graph). minimize() fails with "No gradients provided for any variable".
Answer (drpngx): tf.floor has no gradient; compute the loss on the probabilities y_prob
(the user's own working variant: loss = mean(|y_true - y_prob|)).
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
tf.set_random_seed(0)
x = tf.placeholder(tf.float32, [None, 6], name="x")
y_true = tf.placeholder(tf.float32, [None, 1], name="y_true")
w1 = tf.Variable(tf.random_normal([6, 8], stddev=0.1), name="w1")
b1 = tf.Variable(tf.zeros([8]), name="b1")
w2 = tf.Variable(tf.random_normal([8, 1], stddev=0.1), name="w2")
b2 = tf.Variable(tf.zeros([1]), name="b2")
hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
layer_dropped = tf.nn.dropout(hidden, rate=0.1)
y_prob = tf.sigmoid(tf.matmul(layer_dropped, w2) + b2)

# Set a thresholds value
y_pred = tf.floor(y_prob)

# Loss Operation
loss_op = tf.reduce_mean(tf.abs(y_true - y_pred))
opt = tf.train.GradientDescentOptimizer(0.005)
grads_and_vars = opt.compute_gradients(loss_op)
grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
optimizer_op = opt.apply_gradients(grads_and_vars) if grads_and_vars else tf.no_op()

rng = np.random.RandomState(0)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(2):
        feed = {x: rng.rand(16, 6), y_true: rng.randint(0, 2, (16, 1))}
        _, l = sess.run([optimizer_op, loss_op], feed)
        print("step", step, "loss", l)
