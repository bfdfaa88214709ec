"""Custom Layer Issue (Lambda layer with a deterministic binary mask: gradient is None).

https://github.com/keras-team/keras/issues/7401

The user built a functional Keras model with
`Lambda(binary_mask)` where binary_mask splits its input in two halves and returns
`K.cast(K.greater(pred1, pred2), K.floatx())`, a 0/1 mask. The optimizer then found a None
gradient for the layers before the Lambda. The answer (mrTsjolder): a layer whose output is
`pred1 > pred2` is not differentiable; if what you want is "x if pred1 > pred2 else 0",
return `mask * x` instead of the mask, which is differentiable (enough) to optimise.
(Keras 2 via tf_keras; a Dense head after the Lambda keeps fit() stepping.)
"""
import numpy as np
import tensorflow as tf
import tf_keras
from tf_keras import backend as K
from tf_keras.layers import Dense, Input, Lambda

tf.random.set_seed(0)
units = 4


def binary_mask(x):
    pred1 = x[:, :units]
    pred2 = x[:, units:]
    mask = K.greater(pred1, pred2)
    mask = K.cast(mask, K.floatx())
    return mask


inputs = Input(shape=(6,))
hidden = Dense(2 * units, name="hidden")(inputs)
masked = Lambda(binary_mask, output_shape=(units,))(hidden)
outputs = Dense(1, name="head")(masked)
model = tf_keras.Model(inputs, outputs)
model.compile(optimizer="sgd", loss="mse")
x = np.random.RandomState(0).randn(16, 6).astype("float32")
y = np.random.RandomState(1).randn(16, 1).astype("float32")
model.fit(x, y, batch_size=8, epochs=1, verbose=2)
