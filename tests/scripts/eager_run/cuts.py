"""An eager loop whose tape sees TF ops cut four variables' paths, one inside a tf.function,
one by a product with a constant zero (TensorFlow gives it zeros, not None)."""

import tensorflow as tf

w_ok = tf.Variable(tf.ones((3, 2)), name="w_ok")
w_stop = tf.Variable(tf.ones((3, 2)), name="w_stop")
w_argmax = tf.Variable(tf.ones((3, 4)), name="w_argmax")
w_model = tf.Variable(tf.ones((3, 1)), name="w_model")
w_zero = tf.Variable(tf.ones((3, 2)), name="w_zero")
x = tf.reshape(tf.range(12, dtype=tf.float32), (4, 3)) / 10.0


@tf.function
def model(inputs):
    return tf.round(inputs @ w_model)


def gradients():
    with tf.GradientTape() as tape:
        hidden = x @ w_ok
        frozen = tf.stop_gradient(x @ w_stop)
        picked = tf.cast(tf.argmax(x @ w_argmax, axis=1), tf.float32)
        rounded = model(x)
        loss = tf.reduce_sum(hidden) + tf.reduce_sum(frozen) + tf.reduce_sum(picked)
        loss += tf.reduce_sum(rounded)
        loss += tf.reduce_sum(x @ w_zero) * 0.0
    return tape.gradient(loss, [w_ok, w_stop, w_argmax, w_model, w_zero])


if __name__ == "__main__":
    for _ in range(3):
        for gradient, variable in zip(gradients(), [w_ok, w_stop, w_argmax, w_model, w_zero]):
            if gradient is not None:
                variable.assign_sub(0.1 * gradient)
