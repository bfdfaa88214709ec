"""Lambda layer and Tensorflow backend gives ValueError
https://github.com/keras-team/keras/issues/5537

The caption generator ends with a Lambda layer that turns each softmax row into a one-hot
vector: k_max = K.max(t, axis=2, keepdims=True); K.cast(K.equal(t, k_max), 'float32').
train_on_batch then fails ("None values not supported" in Keras 1; "No gradients provided
for any variable" now): the equality with the max is a predicate, and its cast 0/1 output
carries no gradient to the LSTM or the Dense layer.
Fix (no maintainer answer is visible in the stored thread; the usual advice, cf.
keras-team/keras#4604): train on the softmax output and take the one-hot/argmax only
when predicting.
"""
import numpy as np
import tensorflow as tf
import keras
from keras.layers import LSTM, Dropout, TimeDistributed, Dense, Lambda

keras.utils.set_random_seed(0)
MAX_SEQUENCE_LENGTH, NOISE_SIZE, NB_WORDS = 5, 4, 6

def softmax_to_onehot(t):
    k_max = tf.reduce_max(t, keepdims=True, axis=2)
    equal = tf.equal(t, k_max)
    return tf.cast(equal, 'float32')

model = keras.Sequential()
model.add(keras.Input((MAX_SEQUENCE_LENGTH, NOISE_SIZE)))
model.add(LSTM(16, return_sequences=True))
model.add(Dropout(0.2))
model.add(TimeDistributed(Dense(NB_WORDS, activation="softmax")))
model.add(Lambda(softmax_to_onehot))
model.compile(loss="categorical_crossentropy", optimizer="adam")

noise = np.random.rand(8, MAX_SEQUENCE_LENGTH, NOISE_SIZE).astype("float32")
captions = np.eye(NB_WORDS)[np.random.randint(0, NB_WORDS, (8, MAX_SEQUENCE_LENGTH))].astype("float32")
loss = model.train_on_batch(noise, captions)
words = softmax_to_onehot(model.predict(noise, verbose=0))
