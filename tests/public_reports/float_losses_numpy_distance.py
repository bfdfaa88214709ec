"""TF 2.0: tf.GradientTape().gradient() returns None
https://github.com/tensorflow/tensorflow/issues/30190

In the Iris custom-training walkthrough the user replaced the loss by a distance between the
distribution of the per-sample losses and a normal distribution: each per-sample loss was turned
into a Python number with float() and appended to a list, the distance was computed with NumPy, and the
result was wrapped back with `tf.convert_to_tensor`. The value left TensorFlow, so every gradient is
None. No answer text is in the stored thread; the change is the one TensorFlow's guide gives for
a computation that leaves TensorFlow (float(), NumPy): keep the per-sample losses as tensors
(`tf.stack`) and compute the distance with TensorFlow ops. (The user's histogram distance is
reduced here to a distance between moments, the same shape of mistake.)
"""
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
features = tf.random.normal([12, 4])
labels = tf.random.uniform([12], maxval=3, dtype=tf.int32)
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(10, activation="relu"), tf.keras.layers.Dense(3)])
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)


def get_distance_between_samples_and_distribution(losses, mu=1.0, sigma=0.5):
    return (np.mean(losses) - mu) ** 2 + (np.std(losses) - sigma) ** 2


def loss(model, x, y):
    y_ = model(x)
    losses = []
    for i in range(y.shape[0]):
        loss = loss_object(y_true=y[i:i + 1], y_pred=y_[i:i + 1])
        losses.append(float(loss))
    dis = get_distance_between_samples_and_distribution(losses)
    return tf.convert_to_tensor(dis, dtype=np.float32)


for step in range(2):
    with tf.GradientTape() as tape:
        loss_value = loss(model, features, labels)
    grads = tape.gradient(loss_value, model.trainable_variables)
    pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
    if pairs:
        optimizer.apply_gradients(pairs)
    print(step, float(loss_value))
