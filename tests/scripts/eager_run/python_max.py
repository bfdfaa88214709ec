"""An eager loop whose loss is Python's max() of two tensors: max picks `w_high`'s product
in Python, and `w_low`, which it does not pick, is not part of the loss. Both variables
are created unnamed, as most eager scripts do: TensorFlow calls both "Variable"."""

import tensorflow as tf

w_low = tf.Variable(1.0)
w_high = tf.Variable(2.0)
x = tf.constant(3.0)


def gradients():
    with tf.GradientTape() as tape:
        loss = max(w_low * x, w_high * x)
    return tape.gradient(loss, [w_low, w_high])


if __name__ == "__main__":
    for _ in range(2):
        for gradient, variable in zip(gradients(), [w_low, w_high]):
            if gradient is not None:
                variable.assign_sub(0.1 * gradient)
