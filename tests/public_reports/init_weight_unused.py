"""Custom layer that creates a trainable weight in __init__ and never uses it in call().

Source: https://github.com/keras-team/keras/issues/4320 ("internal weights ... there's no way for
me to hook them into my custom layer without getting an error that the trainable weights cannot
have gradient descent performed on them") and https://github.com/tensorflow/tensorflow/issues/46325
(weights created in __init__ of a Layer). Adapted: Keras 3 add_weight in __init__; `gate` is
created but call() forgets it; fit with one step.
TF truth: tree_layer/gate gets None ("Gradients do not exist"), the rest trains.
"""
import numpy as np
import keras
from keras import ops


class TreeLayer(keras.layers.Layer):
    def __init__(self, units, **kw):
        super().__init__(**kw)
        self.units = units
        self.gate = self.add_weight(name="gate", shape=(units,), initializer="ones")

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.units))

    def call(self, x):
        return ops.tanh(ops.matmul(x, self.kernel))  # forgot: * self.gate


model = keras.Sequential([keras.Input((5,)), TreeLayer(4, name="tree_layer"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(np.random.rand(8, 5).astype("float32"), np.random.rand(8, 1).astype("float32"),
          epochs=1, batch_size=8, verbose=0)
