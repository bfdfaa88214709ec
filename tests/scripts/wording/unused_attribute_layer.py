"""A subclassed Keras model whose `extra` layer is built in __init__ and never called: checked
as a plain script (`--loss step`) and as a run, the story and its fix are told in one wording."""

import keras
import tensorflow as tf


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.body = keras.layers.Dense(4)
        self.extra = keras.layers.Dense(4)

    def build(self, input_shape):
        self.body.build(input_shape)
        self.extra.build(input_shape)

    def call(self, x):
        return self.body(x)


model = Net()
model.build((None, 3))
x = tf.random.normal([8, 3])
optimizer = keras.optimizers.SGD(0.1)


@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
    optimizer.apply_gradients(pairs)
    return loss


if __name__ == "__main__":
    step()
