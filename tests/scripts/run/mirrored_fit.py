"""Keras fit under a MirroredStrategy: the strategy's own variable and the mirrored components
of the model's weights are no variables the script forgot to train."""

import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
x = tf.random.stateless_normal([16, 3], seed=[1, 2])
y = tf.random.stateless_normal([16, 1], seed=[3, 4])
model.fit(x, y, epochs=1, verbose=0)
