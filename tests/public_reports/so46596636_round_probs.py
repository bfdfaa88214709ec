"""Differentiable round function in Tensorflow?
https://stackoverflow.com/questions/46596636/differentiable-round-function-in-tensorflow
(mirrors: https://py4u.org/questions/46596636/ , https://www.developerload.com/differentiable-round-function-in-tensorflow)

The network outputs a list of probabilities which the user rounds with tf.round() to 0 or 1
("crucial for this project") before the loss; tf.round has no gradient, so nothing trains.
Answers: rounding is not differentiable; keep probabilities, or (answer used here, since the
asker needs the 0/1 values forward) a straight-through round:
x - tf.stop_gradient(x - tf.round(x)).
"""
import numpy as np
import tensorflow as tf

tf.random.set_seed(0)
model = tf.keras.Sequential([
    tf.keras.Input(shape=(8,)),
    tf.keras.layers.Dense(16, activation="relu"),
    tf.keras.layers.Dense(4, activation="sigmoid"),
])
optimizer = tf.keras.optimizers.Adam(1e-3)
rng = np.random.RandomState(0)
x = rng.rand(32, 8).astype("float32")
y = rng.randint(0, 2, (32, 4)).astype("float32")

for step in range(2):
    with tf.GradientTape() as tape:
        probs = model(x, training=True)
        bits = tf.round(probs)
        loss = tf.reduce_mean(tf.square(y - bits))
    grads = tape.gradient(loss, model.trainable_variables)
    pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
    if pairs:
        optimizer.apply_gradients(pairs)
    print("step", step, "loss", float(loss), "grads", [g is not None for g in grads])
