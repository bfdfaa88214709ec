"""keras-io's Deep Q-Learning for Atari Breakout: an eager GradientTape step on the online
network, a target network that only predicts (its weights are copied in every N frames, never
trained); small: random frames instead of the Atari environment, one update.
https://github.com/keras-team/keras-io/blob/master/examples/rl/deep_q_network_breakout.py"""

import os

os.environ["KERAS_BACKEND"] = "tensorflow"

import keras
from keras import layers
import numpy as np
import tensorflow as tf

seed = 42
gamma = 0.99
epsilon = 1.0
epsilon_min = 0.1
epsilon_max = 1.0
epsilon_interval = epsilon_max - epsilon_min
batch_size = 4
max_steps_per_episode = 20
num_actions = 4
rng = np.random.default_rng(seed)


def create_q_model():
    return keras.Sequential(
        [
            layers.Lambda(
                lambda tensor: keras.ops.transpose(tensor, [0, 2, 3, 1]),
                output_shape=(20, 20, 4),
                input_shape=(4, 20, 20),
            ),
            layers.Conv2D(4, 8, strides=4, activation="relu"),
            layers.Conv2D(8, 3, strides=1, activation="relu"),
            layers.Flatten(),
            layers.Dense(16, activation="relu"),
            layers.Dense(num_actions, activation="linear"),
        ]
    )


model = create_q_model()
model_target = create_q_model()

optimizer = keras.optimizers.Adam(learning_rate=0.00025, clipnorm=1.0)

action_history = []
state_history = []
state_next_history = []
rewards_history = []
done_history = []
frame_count = 0
update_after_actions = 4
update_target_network = 100
loss_function = keras.losses.Huber()

state = rng.random((4, 20, 20)).astype("float32")
for timestep in range(1, max_steps_per_episode):
    frame_count += 1
    action = rng.integers(num_actions)
    epsilon -= epsilon_interval / 1000.0
    epsilon = max(epsilon, epsilon_min)
    state_next, reward, done = rng.random((4, 20, 20)).astype("float32"), 1.0, False

    action_history.append(action)
    state_history.append(state)
    state_next_history.append(state_next)
    done_history.append(done)
    rewards_history.append(reward)
    state = state_next

    if frame_count % update_after_actions == 0 and len(done_history) > batch_size:
        indices = rng.choice(range(len(done_history)), size=batch_size)
        state_sample = np.array([state_history[i] for i in indices])
        state_next_sample = np.array([state_next_history[i] for i in indices])
        rewards_sample = [rewards_history[i] for i in indices]
        action_sample = [action_history[i] for i in indices]
        done_sample = keras.ops.convert_to_tensor([float(done_history[i]) for i in indices])

        future_rewards = model_target.predict(state_next_sample, verbose=0)
        updated_q_values = rewards_sample + gamma * keras.ops.amax(future_rewards, axis=1)
        updated_q_values = updated_q_values * (1 - done_sample) - done_sample
        masks = keras.ops.one_hot(action_sample, num_actions)

        with tf.GradientTape() as tape:
            q_values = model(state_sample)
            q_action = keras.ops.sum(keras.ops.multiply(q_values, masks), axis=1)
            loss = loss_function(updated_q_values, q_action)

        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    if frame_count % update_target_network == 0:
        model_target.set_weights(model.get_weights())
