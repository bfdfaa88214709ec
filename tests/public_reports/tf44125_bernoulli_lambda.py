"""No gradients provided for any variable when doing binarization
https://github.com/tensorflow/tensorflow/issues/44125

A Lambda layer turns a sigmoid probability into a 0/1 sample,
x1 * K.cast(K.random_uniform(shape=K.shape(x2)) <= x2, 'float32'), i.e. a Bernoulli draw;
train_on_batch fails with "No gradients provided for any variable": the comparison and
the cast to a 0/1 mask carry no gradient back to the Dense layer that makes x2.
Fix (no maintainer answer is visible in the stored thread; the standard estimator for a
stochastic binary unit): straight-through sampling - keep the sample forward but pass the
gradient to the probability: x2 + stop_gradient(sample - x2).
"""
import numpy as np
import tensorflow as tf
import keras
from keras.layers import Input, Dense, Lambda
from keras.models import Model

keras.utils.set_random_seed(0)

def binarize(d):
    x1, x2 = d
    return x1 * tf.cast(tf.random.uniform(shape=tf.shape(x2)) <= x2, 'float32')

inp = Input((1,))
var = Dense(1, activation='sigmoid')(inp)
out = Lambda(binarize)([inp, var])

model = Model(inp, out)
model.compile(loss='mse', optimizer='sgd')

x = np.random.normal(size=(128, 1)).astype('float32')
y = (x >= 0).astype('float32')
print(model.train_on_batch(x, y))
