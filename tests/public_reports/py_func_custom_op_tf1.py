"""Gradient of tf.py_func and how to define gradients for a custom op only with python
https://github.com/tensorflow/tensorflow/issues/1095

TF1 graph: the user computed part of the loss with a Python function wrapped in tf.py_func
(x passes through it), then `opt.compute_gradients(loss, ...)`: a PyFunc op has no gradient, so x
gets None while y trains. The answer (fchollet): register a Python gradient with
`@tf.RegisterGradient` and, since every py_func op has type PyFunc, map this op to it with
`graph.gradient_override_map({"PyFunc": name})`.
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
graph = tf.get_default_graph()
x = tf.Variable(3., name="x")
y = tf.Variable(4., name="y")


def custom_op(v):
    return np.square(v).astype(np.float32)


@tf.RegisterGradient("CustomOpGrad")
def _custom_op_grad(op, grad):
    return grad * 2.0 * op.inputs[0]


px = tf.py_func(custom_op, [x], tf.float32)
loss = tf.square(13. - px * y)

opt = tf.train.GradientDescentOptimizer(0.001)
grads_and_vars = opt.compute_gradients(loss, [x, y])
train_op = opt.apply_gradients([(g, v) for g, v in grads_and_vars if g is not None])
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(2):
        _, l = sess.run([train_op, loss])
        print(step, l, sess.run([x, y]))
