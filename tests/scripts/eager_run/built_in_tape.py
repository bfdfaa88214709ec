"""A beginner's eager loop: a subclassed model built by its first call, inside the tape, with a
tf.stop_gradient on its first layer's output."""

import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.linear1 = tf.keras.layers.Dense(8, activation="relu")
        self.linear2 = tf.keras.layers.Dense(1)

    def call(self, x):
        h = tf.stop_gradient(self.linear1(x))
        return self.linear2(h)


model = Net()
x = tf.random.stateless_normal([16, 4], seed=[1, 2])
y = tf.random.stateless_normal([16, 1], seed=[3, 4])


def gradients():
    """TensorFlow's gradients of the loop's first step, by layer attribute and weight (Keras
    numbers its paths per process: net_2/dense_4 where other models were made before)."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    attribute = {
        id(v): name for name in ("linear1", "linear2") for v in getattr(model, name).weights
    }
    return {f"{attribute[id(v)]}/{v.name}": g for v, g in zip(model.trainable_variables, grads)}


if __name__ == "__main__":
    optimizer = tf.keras.optimizers.SGD(0.01)
    for _step in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
