"""Feature Request: Providing Gradients for `layer.set_weights()`
https://github.com/tensorflow/tensorflow/issues/53541
(also https://github.com/keras-team/keras/issues/15836)

Inside a GradientTape the user scaled a learner's weights by `l`, wrote them back with
set_weights (`learner.set_weights(...)`) and computed the loss by calling the learner: the gradient with
respect to `l` is None, because set_weights copies the values into the learner's variables (through
NumPy) and the loss reads the variables, not new_weights. (Here `l` is a tf.Variable trained by an
optimizer; the user watched a constant.) No fix is given in the stored thread; the change here is
the Keras 3 API made for this: run the learner with the new weight values as tensors,
`learner.stateless_call(new_weights, [], x)`, instead of storing them with set_weights.
"""
import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.RandomState(0); keras.utils.set_random_seed(0)
batch = {"train": {"X": rng.randn(8, 4).astype("float32"), "y": np.eye(3)[rng.randint(0, 3, 8)].astype("float32")}}
learner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
l = tf.Variable(0.1, name="l")
opt = keras.optimizers.SGD(0.01)

for step in range(2):
    with tf.GradientTape() as gt:
        new_weights = [w * l for w in learner.weights]
        learner.set_weights(new_weights)
        y_pred = learner(batch["train"]["X"])
        loss = tf.reduce_mean(keras.losses.categorical_crossentropy(batch["train"]["y"], y_pred))
    grads = gt.gradient(loss, [l])
    if grads[0] is not None:
        opt.apply_gradients(zip(grads, [l]))
    print(step, float(loss), grads[0] is None)
