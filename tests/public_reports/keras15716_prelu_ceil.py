"""PReLU followed by tf.math.ceil: the PReLU alpha (and everything before it) gets no gradient.

Source: https://github.com/keras-team/keras/issues/15716 ("WARNING:tensorflow:Gradients do not
exist for variables ['p_re_lu/alpha:0'] when minimizing the loss."; maintainer: tf.math.ceil has
no gradient by design). Adapted: Keras 3, a tiny Dense->PReLU->ceil->Dense model, one fit step.
A skip connection keeps the first Dense alive, so only PReLU alpha is dead.
TF truth: p_re_lu/alpha gets None; the dense layers train.
"""
import numpy as np
import tensorflow as tf
import keras
from keras import layers

inp = keras.Input((6,))
h = layers.Dense(8)(inp)
p = layers.PReLU()(h)
q = layers.Lambda(lambda t: tf.math.ceil(t))(p)
z = layers.Concatenate()([q, h])
out = layers.Dense(1)(z)
model = keras.Model(inp, out)
model.compile(optimizer="adam", loss="mse")
model.fit(np.random.rand(16, 6).astype("float32"), np.random.rand(16, 1).astype("float32"),
          epochs=1, batch_size=16, verbose=0)
