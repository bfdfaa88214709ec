"""An eager loop whose ops take the variables themselves (`tf.matmul(x, w_ok)`,
`tf.stop_gradient(w_stopped)`): TensorFlow converts them in C, with no read op the recorder
sees, and for the stop_gradient not even the tape notes the read."""

import tensorflow as tf

w_ok = tf.Variable(tf.ones((3, 2)), name="w_ok")
w_stopped = tf.Variable(tf.fill((2,), 0.5), name="w_stopped")
x = tf.reshape(tf.range(12, dtype=tf.float32), (4, 3)) / 10.0


def gradients():
    with tf.GradientTape() as tape:
        scaled = tf.matmul(x, w_ok) * tf.stop_gradient(w_stopped)
        loss = tf.reduce_sum(scaled)
    return tape.gradient(loss, [w_ok, w_stopped])


if __name__ == "__main__":
    for _ in range(3):
        for gradient, variable in zip(gradients(), [w_ok, w_stopped]):
            if gradient is not None:
                variable.assign_sub(0.1 * gradient)
