"""Gradient return None
https://github.com/tensorflow/tensorflow/issues/58614

Custom training loop (eager GradientTape) for a binary classifier with a count-based loss:
correct_count = tf.math.count_nonzero(tf.math.equal(tf.round(prediction), output)), turned
into a ratio; tape.gradient(loss, model.trainable_weights) is all None ("I know the issue
is way of calculate loss. I tried with custom mse loss. It works fine").
Fix (no maintainer answer is visible in the stored thread; the standard change for a
count/accuracy loss): count softly - sum the predicted probability of the true class
instead of counting rounded predictions that equal the label.
"""
import numpy as np
import tensorflow as tf

tf.random.set_seed(0)

class Trainer:
    def __init__(self):
        self.model = tf.keras.Sequential([tf.keras.Input((6,)), tf.keras.layers.Dense(8, activation="relu"),
                                          tf.keras.layers.Dense(1, activation="sigmoid")])
        self.optimizer = tf.keras.optimizers.Adam(1e-3)

    def custom_loss(self, output, prediction):
        correct_count = tf.math.count_nonzero(tf.math.equal(tf.round(prediction), tf.cast(output, tf.float32)))
        incorrect_count = tf.cast(prediction.shape[0], tf.float32) - tf.cast(correct_count, tf.float32)
        return incorrect_count / prediction.shape[0]

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            prediction = self.model(x, training=True)
            loss = self.custom_loss(y, prediction)
        grads = tape.gradient(loss, self.model.trainable_weights)
        pairs = [(g, v) for g, v in zip(grads, self.model.trainable_weights) if g is not None]
        if pairs:
            self.optimizer.apply_gradients(pairs)
        return loss, grads

rng = np.random.RandomState(0)
trainer = Trainer()
for step in range(2):
    loss, grads = trainer.train_step(rng.rand(100, 6).astype("float32"), rng.randint(0, 2, (100, 1)))
    print(step, float(loss), [g is None for g in grads])
