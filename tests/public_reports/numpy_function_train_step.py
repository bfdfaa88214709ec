"""ValueError: No gradients provided for any variable: ['conv2d/kernel:0', 'conv2d/bias:0', ...]
https://github.com/tensorflow/tensorflow/issues/47288

An A2C-style agent ported from TF1: inside its tf.function train_step, under the GradientTape,
the user got the rollout from `tf.numpy_function(self.np_train_step, [], [tf.float32, ...])`, and
np_train_step also ran the model to produce `value_logits` and `actor_logits`. numpy_function has
no gradient, and the model ran in Python outside the traced graph, so every weight gets None.
The change (no reply is in the stored excerpt of the thread; TF documents numpy_function as
not differentiable): let numpy_function return only the environment data (states, rewards,
actions) and call the model on the states inside the tape.
"""
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0); tf.keras.utils.set_random_seed(0)


class Agent:
    def __init__(self):
        self.model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(4)])
        self.optimizer = tf.keras.optimizers.Adam(1e-3)

    def np_train_step(self):
        states = rng.randn(5, 3).astype(np.float32)
        rewards = rng.rand(5).astype(np.float32)
        actions = rng.randint(0, 2, size=5).astype(np.float32)
        logits = self.model(states).numpy()
        return states, rewards, actions, logits[:, 2:], logits[:, :2]

    @tf.function
    def train_step(self):
        with tf.GradientTape() as tape:
            states, rewards, actions, value_logits, actor_logits = tf.numpy_function(self.np_train_step, [], [tf.float32] * 5)
            action_probs = tf.nn.softmax(actor_logits)
            values = tf.reduce_sum(action_probs * value_logits, axis=-1)
            selected = tf.gather(action_probs, tf.cast(actions, tf.int32), batch_dims=1)
            loss = tf.reduce_mean((rewards - values) ** 2) - tf.reduce_mean(tf.math.log(selected + 1e-8) * (rewards - values))
        grads = tape.gradient(loss, self.model.trainable_variables)
        pairs = [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None]
        if pairs:
            self.optimizer.apply_gradients(pairs)
        return loss


agent = Agent()
for step in range(2):
    print(step, float(agent.train_step()))
