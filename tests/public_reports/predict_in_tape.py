"""Loss computed from model.predict() inside a GradientTape.

Source: https://github.com/tensorflow/tensorflow/issues/20630 (asimshankar: "tf.keras.Model.predict
returns a numpy.ndarray ... use model(x) instead of model.predict(x)"); the same question:
https://github.com/SciSharp/TensorFlow.NET/issues/1197. Adapted: Keras 3 subclassed model, eager
tape, one step.  TF truth: both dense variables get None -> apply_gradients raises.
"""
import tensorflow as tf
import keras


class Model(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense1 = keras.layers.Dense(units=1, activation="relu")

    def call(self, inputs):
        return self.dense1(inputs)


n = 10
x = tf.random.normal([n, 2])
y = x[:, :1] * 3 + 2
model = Model()
model(x)
optimizer = keras.optimizers.SGD(0.01)
with tf.GradientTape() as tape:
    error = model.predict(x, verbose=0) - y  # the bug: predict returns numpy
    loss_value = tf.reduce_mean(tf.square(error))
grads = tape.gradient(loss_value, model.trainable_variables)
optimizer.apply_gradients(zip(grads, model.trainable_variables))
