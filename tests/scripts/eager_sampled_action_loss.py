"""An actor-critic loss: the action index is sampled with NumPy from the policy's probabilities,
a path that carries no gradient anyway; both networks still get gradient."""

import numpy as np
import tensorflow as tf

policy = tf.Variable([[0.1, 0.2, 0.3]], name="policy")
critic = tf.Variable([[0.5]], name="critic")
state = tf.constant([[1.0]])
rng = np.random.default_rng(0)


def loss():
    probs = tf.nn.softmax(tf.matmul(state, policy))[0]
    action = rng.choice(3, p=probs.numpy())
    value = tf.matmul(state, critic)[0, 0]
    advantage = 1.0 - value
    return -tf.math.log(probs[action]) * tf.stop_gradient(advantage) + tf.square(advantage)
