"""A DDPG training step, as keras-io's DDPG example writes it: target networks made by the
builder and by clone_model, each given the online network's weights, trained by neither tape
(soft-updated after the step)."""

import keras
import tensorflow as tf


def mlp(name, inputs, outputs):
    return keras.Sequential(
        [
            keras.Input((inputs,)),
            keras.layers.Dense(6, activation="relu"),
            keras.layers.Dense(outputs),
        ],
        name=name,
    )


actor = mlp("actor", 3, 2)
critic = mlp("critic", 5, 1)
target_actor = mlp("target_actor", 3, 2)
target_actor.set_weights(actor.get_weights())
target_critic = keras.models.clone_model(
    critic,
    clone_function=lambda layer: layer.__class__.from_config(
        {**layer.get_config(), "name": f"target_{layer.name}"}
    ),
)
target_critic.set_weights(critic.get_weights())
critic_optimizer = keras.optimizers.Adam(1e-3)
actor_optimizer = keras.optimizers.Adam(1e-3)


@tf.function
def train_step(state, action, reward, next_state):
    with tf.GradientTape() as tape:
        future = target_critic(tf.concat([next_state, target_actor(next_state)], -1))
        target = reward + 0.99 * future
        critic_loss = tf.reduce_mean(tf.square(target - critic(tf.concat([state, action], -1))))
    gradients = tape.gradient(critic_loss, critic.trainable_variables)
    critic_optimizer.apply_gradients(zip(gradients, critic.trainable_variables))
    with tf.GradientTape() as tape:
        actor_loss = -tf.reduce_mean(critic(tf.concat([state, actor(state)], -1)))
    gradients = tape.gradient(actor_loss, actor.trainable_variables)
    actor_optimizer.apply_gradients(zip(gradients, actor.trainable_variables))
    for online, target in ((actor, target_actor), (critic, target_critic)):
        for a, b in zip(target.variables, online.variables):
            a.assign(0.995 * a + 0.005 * b)


if __name__ == "__main__":
    for _ in range(2):
        train_step(
            tf.random.normal([4, 3]),
            tf.random.normal([4, 2]),
            tf.random.normal([4, 1]),
            tf.random.normal([4, 3]),
        )
