"""Lambda(argmax) + cast in the middle of a functional model.

Source: https://github.com/keras-team/keras/issues/11157 ("backend argmax has none for gradients":
Embedding -> LSTM -> Dense(softmax) -> Lambda(K.argmax) -> Lambda(K.cast) -> Dense -> ...).
Adapted to Keras 3 (keras.ops.argmax), tiny sizes, random data, one fit step.
TF truth: embedding, lstm and the first dense get None; the dense after the argmax trains.
"""
import numpy as np
import keras
from keras import layers, ops

vocab, T = 20, 5
inp = keras.Input((T,), dtype="int32")
h = layers.Embedding(vocab, 8)(inp)
h = layers.LSTM(8, return_sequences=True)(h)
h = layers.Dense(vocab, activation="softmax")(h)
h = layers.Lambda(lambda t: ops.argmax(t, axis=-1))(h)
h = layers.Lambda(lambda t: ops.cast(t, "float32"))(h)
out = layers.Dense(3, activation="softmax")(h)
model = keras.Model(inp, out)
model.compile(optimizer="adam", loss="categorical_crossentropy")
x = np.random.randint(0, vocab, (8, T)).astype("int32")
y = keras.utils.to_categorical(np.random.randint(0, 3, 8), 3)
model.fit(x, y, epochs=1, batch_size=8, verbose=0)
