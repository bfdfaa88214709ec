"""Two variables created on one line; the second is cut by a stop_gradient, the first trains.
(Their TensorFlow names differ from their Python ones, and from each other, so that TensorFlow's
verdicts name each one.)"""

import tensorflow as tf

w = tf.Variable(1.0, name="scale"); d = tf.Variable(2.0, name="offset")  # noqa: E702  # fmt: skip
optimizer = tf.keras.optimizers.SGD(0.1)


def loss():
    return w * 3.0 + tf.stop_gradient(d) * 2.0


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        value = loss()
    gradients = tape.gradient(value, [w, d])
    optimizer.apply_gradients(zip(gradients, [w, d]))


if __name__ == "__main__":
    train_step()
