"""I want to connect two networks, but No gradients provided for any variable.

https://github.com/tensorflow/tensorflow/issues/30527

TF1 graph. The user had a trained forward network fwNN (its weight and bias loaded as fixed
values by get_w_b()) and put a new network inNN in front of it to be trained through it:
`D_logits_op = inNN(T_lamb)`, but built the prediction as `fwNN(DLs, None, weight, bias)` where
DLs is a separate placeholder, not the output of inNN. T_loss therefore does not depend on any
variable of inNN, and `minimize(T_loss_op)` fails with "No gradients provided for any variable";
training on D_loss_op (which does read inNN) works. The thread got no answer beyond "ask on Stack
Overflow"; the change its own description calls for is to feed inNN's output (with the lambda
column) into fwNN instead of the placeholder.
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
tf.set_random_seed(0)


def get_w_b():  # the trained forward network's parameters, fixed
    rng = np.random.RandomState(0)
    return tf.constant(rng.randn(5, 1).astype("float32")), tf.constant(np.zeros(1, "float32"))


def inNN(x, reg):
    with tf.variable_scope("inNN"):
        w1 = tf.get_variable("w1", [2, 8])
        b1 = tf.get_variable("b1", [8], initializer=tf.zeros_initializer())
        w2 = tf.get_variable("w2", [8, 4])
        b2 = tf.get_variable("b2", [4], initializer=tf.zeros_initializer())
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2


def fwNN(x, reg, weight, bias):
    return tf.matmul(x, weight) + bias


T_lamb = tf.placeholder(tf.float32, [None, 2], name="inNN_inputs")
Ts = tf.placeholder(tf.float32, [None, 1], name="T_labels")
DLs = tf.placeholder(tf.float32, [None, 5], name="D_lamb")
weight, bias = get_w_b()
D_logits_op = inNN(T_lamb, None)
prediction = fwNN(DLs, None, weight, bias)
T_loss_op = tf.reduce_mean(tf.square(prediction - Ts))
train_step_op = tf.train.AdamOptimizer(1e-3).minimize(T_loss_op)

rng = np.random.RandomState(1)
feed = {T_lamb: rng.randn(16, 2), Ts: rng.randn(16, 1), DLs: rng.randn(16, 5)}
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(2):
        print(sess.run([train_step_op, T_loss_op], feed)[1])
