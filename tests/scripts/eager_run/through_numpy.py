"""An eager loop whose loss takes `w_numpy`'s value back from NumPy."""

import tensorflow as tf

w_ok = tf.Variable(tf.ones((3, 2)), name="w_ok")
w_numpy = tf.Variable(tf.ones((3, 1)), name="w_numpy")
x = tf.reshape(tf.range(12, dtype=tf.float32), (4, 3)) / 10.0


def gradients():
    with tf.GradientTape() as tape:
        direct = tf.reduce_sum(x @ w_ok)
        detached = tf.constant((x @ w_numpy).numpy())
        loss = direct + tf.reduce_sum(detached)
    return tape.gradient(loss, [w_ok, w_numpy])


if __name__ == "__main__":
    for _ in range(3):
        for gradient, variable in zip(gradients(), [w_ok, w_numpy]):
            if gradient is not None:
                variable.assign_sub(0.1 * gradient)
