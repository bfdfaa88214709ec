"""No gradients provided for any variable (ranking loss with tf.argsort)
https://github.com/tensorflow/tensorflow/issues/56396  (same report: https://github.com/keras-team/keras/issues/16663)

The user ranks the cells of a notebook: the custom Keras loss compares the orders of the
true and predicted scores, actual_orders = tf.argsort(tf.argsort(y_true)) and
predicted_orders = tf.argsort(tf.argsort(y_pred)), summing |actual - predicted|;
model.fit fails with "No gradients provided for any variable" (with loss='mse' it trains).
argsort returns integer positions, so the rank carries no gradient.
Fix (no maintainer answer is visible in the stored thread; the usual change for rank
losses, as in tf-ranking's ApproxNDCG): a soft rank of the predictions,
rank_i = sum_j sigmoid((s_i - s_j) / T), compared with the true ranks.
"""
import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)

def calculate_loss(pad_val, max_val):
    def loss(y_true, y_pred):
        pad_mask = tf.cast(tf.equal(y_true, pad_val), y_true.dtype)
        y_true = y_true * (1 - pad_mask) + max_val * pad_mask
        actual_orders = tf.cast(tf.argsort(tf.argsort(y_true)), tf.float32)
        predicted_orders = tf.cast(tf.argsort(tf.argsort(y_pred)), tf.float32)
        return tf.reduce_sum(tf.abs(actual_orders - predicted_orders), axis=-1)
    return loss

inputs = keras.Input((10, 16))
h = keras.layers.Dense(32, activation="relu")(inputs)
scores = keras.layers.Reshape((10,))(keras.layers.Dense(1)(h))
model = keras.Model(inputs, scores)
model.compile(optimizer="adam", loss=calculate_loss(pad_val=-1.0, max_val=10.0))
x = np.random.rand(8, 10, 16).astype("float32")
y = np.stack([np.random.permutation(10) for _ in range(8)]).astype("float32")
model.fit(x, y, epochs=1, batch_size=4, verbose=2)
