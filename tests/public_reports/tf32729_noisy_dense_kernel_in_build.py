"""ValueError: Variable 'basic_nstepTD_1/noisy_dense/bias:0' has `None` for gradient.

https://github.com/tensorflow/tensorflow/issues/32729

The user wrote a NoisyDense layer whose build() creates weight_mu/weight_sigma/bias_mu/bias_sigma
as tf.Variables and also computes, once, the noisy kernel (weight_mu + weight_sigma *
weights_eps) and the noisy bias (bias_mu + bias_sigma * bias_eps) as attributes; call() only
uses self.kernel and self.bias. The agent calls its model to pick actions before training, so
build() has already run; fit() then raises/warns that the variables have None for gradient.
The user noticed that putting those two lines in call() makes the error disappear, and the
answer (gowthamkpr) confirms: build() is where weights are set up, call() is where the
computation on them must happen.
"""
import numpy as np
import tensorflow as tf
import tf_keras
from tf_keras import layers as kl

tf.random.set_seed(0)


class NoisyDense(kl.Layer):
    def __init__(self, units, std_init=0.5):
        super().__init__()
        self.units = units
        self.std_init = std_init

    def build(self, input_shape):
        n_in = input_shape[-1]
        mu_init = tf.random_uniform_initializer(-1 / np.sqrt(n_in), 1 / np.sqrt(n_in))
        sigma_init = tf.constant_initializer(self.std_init / np.sqrt(self.units))
        self.weight_mu = tf.Variable(mu_init((n_in, self.units), dtype="float32"), name="weight_mu")
        self.weight_sigma = tf.Variable(sigma_init((n_in, self.units), dtype="float32"), name="weight_sigma")
        self.bias_mu = tf.Variable(mu_init((self.units,), dtype="float32"), name="bias_mu")
        self.bias_sigma = tf.Variable(sigma_init((self.units,), dtype="float32"), name="bias_sigma")
        self.weights_eps = tf.random.normal((n_in, self.units))
        self.bias_eps = tf.random.normal((self.units,))
        self.kernel = self.weight_mu + self.weight_sigma * self.weights_eps
        self.bias = self.bias_mu + self.bias_sigma * self.bias_eps

    def call(self, inputs):
        return tf.matmul(inputs, self.kernel) + self.bias


model = tf_keras.Sequential([kl.Dense(16, activation="relu"), NoisyDense(3)])
obs = np.random.RandomState(0).randn(32, 4).astype("float32")
action = int(np.argmax(model(obs[:1])[0]))  # the agent acts before it trains
q_target = np.random.RandomState(1).randn(32, 3).astype("float32")
model.compile(optimizer="adam", loss="mse")
model.fit(obs, q_target, batch_size=16, epochs=1, verbose=2)
