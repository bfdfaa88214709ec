"""A Keras model with its own train_step: a critic scores the stopped reconstruction, and a
`spare` layer is built but never used."""

import keras
import numpy as np
import tensorflow as tf
from keras import layers


def step_loss(model, x, y):
    prediction = model(x, training=True)
    score = model.critic(tf.stop_gradient(prediction))
    return tf.reduce_mean(tf.square(prediction - y)) + tf.reduce_mean(score)


class Reconstructor(keras.Model):
    def __init__(self):
        super().__init__()
        self.encoder = layers.Dense(8, name="encoder")
        self.decoder = layers.Dense(4, name="decoder")
        self.critic = layers.Dense(1, name="critic")
        self.spare = layers.Dense(4, name="spare")

    def call(self, x):
        return self.decoder(self.encoder(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = step_loss(self, x, y)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        return {"loss": loss}


model = Reconstructor()
model(np.zeros((2, 4), "float32"))
model.critic.build((None, 4))
model.spare.build((None, 4))
model.compile(optimizer="sgd", loss="mse")
