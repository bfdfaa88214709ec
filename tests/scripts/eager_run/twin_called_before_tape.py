"""A DQN-style twin: both networks are called once before the tape (to build them); only the
online one is called inside it, and its layer reads one of its three heads. The target network's
weights and the two unread heads are listed in the gradient request and get no gradient: the
target because only its call before the tape read it, the heads because the call inside the tape
never reads them."""

import tensorflow as tf


class Heads(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.heads = [self.add_weight(shape=(input_shape[-1], 1), name=f"h{i}") for i in range(3)]

    def call(self, x):
        return tf.matmul(x, self.heads[0])


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.body = Heads()

    def call(self, x):
        return self.body(x)


online, target = Net(), Net()
x = tf.ones([2, 4])
online(x)
target(x)


def gradients():
    """TensorFlow's gradients of the step, by variable path."""
    variables = online.trainable_variables + target.trainable_variables
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(online(x))
    return {v.path: g for v, g in zip(variables, tape.gradient(loss, variables))}


if __name__ == "__main__":
    optimizer = tf.keras.optimizers.SGD(0.01)
    variables = online.trainable_variables + target.trainable_variables
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(online(x))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
