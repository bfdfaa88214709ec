"""Twin networks, as real training code makes them: DDPG's target networks (the builder called
again, and clone_model, each followed by set_weights), a CycleGAN's two discriminators from one
seeded builder, a siamese pair whose second tower is left over, and two layers that share one
seeded initializer. Each loss leaves one twin of a pair unread: TensorFlow gives it no gradient."""

import keras
import tensorflow as tf


def mlp(name, inputs, outputs, seed=None):
    init = keras.initializers.GlorotUniform(seed=seed)
    return keras.Sequential(
        [
            keras.Input((inputs,)),
            keras.layers.Dense(6, activation="relu", kernel_initializer=init),
            keras.layers.Dense(outputs, kernel_initializer=init),
        ],
        name=name,
    )


# DDPG: the actor, the critic and their target networks.
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

# CycleGAN: one generator, two discriminators from one seeded builder.
generator = mlp("generator", 3, 3)
disc_x = mlp("disc_x", 3, 1, seed=1)
disc_y = mlp("disc_y", 3, 1, seed=1)

# A siamese pair: one tower serves both inputs, the other is left over.
tower_a = mlp("tower_a", 3, 4, seed=7)
tower_b = mlp("tower_b", 3, 4, seed=7)

# Two layers that share one seeded initializer: equal values by construction.
shared = keras.initializers.RandomNormal(seed=3)
left = keras.layers.Dense(4, kernel_initializer=shared, name="left")
right = keras.layers.Dense(4, kernel_initializer=shared, name="right")
left.build((None, 3))
right.build((None, 3))

state, action, reward = tf.random.normal([4, 3]), tf.random.normal([4, 2]), tf.random.normal([4, 1])
next_state = tf.random.normal([4, 3])


def critic_loss():
    future = target_critic(tf.concat([next_state, target_actor(next_state)], -1))
    target = reward + 0.99 * tf.stop_gradient(future)
    return tf.reduce_mean(tf.square(target - critic(tf.concat([state, action], -1))))


def actor_loss():
    return -tf.reduce_mean(critic(tf.concat([state, actor(state)], -1)))


def generator_loss():
    return tf.reduce_mean(tf.square(disc_y(generator(state)) - 1.0))


def siamese_loss():
    # A similarity of the two embeddings (a difference would cancel the last bias).
    return tf.reduce_mean(tf.reduce_sum(tower_a(state) * tower_a(next_state), -1))


def left_loss():
    return tf.reduce_mean(tf.square(left(state)))


def twin_loss():
    """Leaves unread: the target networks, disc_x, tower_b, right."""
    return actor_loss() + generator_loss() + siamese_loss() + left_loss()
