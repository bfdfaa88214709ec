"""Getting error when trying to move tape defination near used place
https://github.com/keras-team/keras-io/issues/406

In the keras-io Actor Critic (CartPole) example the user moved `with tf.GradientTape() as tape:`
from the top of the episode down to just before the loss sum, so the forward passes
(`model(state)`, returning the action probabilities and critic value) ran before the tape opened: "No gradients provided
for any variable" for every Dense weight. The answer: the tape has not watched the forward pass
(the `model(state)` call), so it knows nothing of the graph; open the tape
before the episode's forward passes, as the example does.
"""
import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

tf.keras.utils.set_random_seed(0)
gamma = 0.99
inputs = layers.Input(shape=(4,))
common = layers.Dense(8, activation="relu")(inputs)
action = layers.Dense(2, activation="softmax")(common)
critic = layers.Dense(1)(common)
model = keras.Model(inputs=inputs, outputs=[action, critic])
optimizer, huber_loss = keras.optimizers.Adam(learning_rate=0.01), keras.losses.Huber()

for episode in range(2):
    action_probs_history, critic_value_history, rewards_history = [], [], []
    for timestep in range(3):
        state = tf.expand_dims(tf.convert_to_tensor(np.random.randn(4).astype("float32")), 0)
        action_probs, critic_value = model(state)
        critic_value_history.append(critic_value[0, 0])
        act = np.random.choice(2, p=np.squeeze(action_probs))
        action_probs_history.append(tf.math.log(action_probs[0, act]))
        rewards_history.append(1.0)
    returns, discounted_sum = [], 0
    for r in rewards_history[::-1]:
        discounted_sum = r + gamma * discounted_sum
        returns.insert(0, discounted_sum)
    with tf.GradientTape() as tape:
        actor_losses = [-lp * (ret - v) for lp, v, ret in zip(action_probs_history, critic_value_history, returns)]
        critic_losses = [huber_loss(tf.expand_dims(v, 0), tf.expand_dims(ret, 0)) for v, ret in zip(critic_value_history, returns)]
        loss_value = sum(actor_losses) + sum(critic_losses)
    grads = tape.gradient(loss_value, model.trainable_variables)
    pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
    if pairs:
        optimizer.apply_gradients(pairs)
    print(episode, float(loss_value))
