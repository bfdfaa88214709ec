"""An eager loop that hands minimize a lambda returning a cost computed before it: the tape
minimize opens sees no op read `w_cost`, and it never trains."""

import tensorflow as tf

w_cost = tf.Variable(2.0)
x = tf.constant(3.0)
cost = (w_cost * x - 1.0) ** 2


def gradients():
    """TensorFlow's gradient of the loss minimize differentiates, its own way."""
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    return [g for g, _ in optimizer.compute_gradients(lambda: cost, var_list=[w_cost])]


if __name__ == "__main__":
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    for _step in range(2):
        optimizer.minimize(lambda: cost, var_list=[w_cost])
