"""TensorFlow: How to generate a differentiable mask
https://stackoverflow.com/questions/52639165/tensorflow-how-to-generate-a-differentiable-mask
(copy with the answer: https://thinbug.com/q/52639165)

The user turns a learned tensor into a 0/1 mask with
tf.cast(tf.cast(input, dtype=tf.bool), dtype=tf.float32) and notes the gradient cannot
flow back. Here the mask gates the features inside a Keras model with a custom
train_step; the mask variable gets no gradient.
Answer: attach a gradient to the mask op yourself - tf.custom_gradient with
grad(dy) = dy * tf.ones_like(x) (straight-through); or use a sigmoid as a soft mask.
"""
import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)

class GatedModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.gate = self.add_weight(shape=(6,), initializer="random_normal", name="gate")
        self.dense = keras.layers.Dense(1)

    def call(self, x):
        mask = tf.cast(tf.cast(self.gate, dtype=tf.bool), dtype=tf.float32)
        return self.dense(x * mask)

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(x, training=True) - y))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply([g if g is not None else tf.zeros_like(v) for g, v in zip(grads, self.trainable_variables)],
                             self.trainable_variables)
        return {"loss": loss}

model = GatedModel()
model.compile(optimizer="sgd")
model.fit(np.random.rand(16, 6).astype("float32"), np.random.rand(16, 1).astype("float32"), epochs=1, verbose=2)
