"""A VQ step whose loss reads a codebook that its gradient request does not list: the codebook
is read by the loss and trained by nothing. A probe model built for a shape check is never
trained either, and is not read by any loss."""

import tensorflow as tf

encoder = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)], name="encoder")
codebook = tf.Variable(tf.random.stateless_normal([5, 3], seed=[1, 2]), name="codebook")
probe = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)], name="probe")
probe(tf.zeros([1, 4]))
optimizer = tf.keras.optimizers.SGD(0.1)
x = tf.random.stateless_normal([8, 4], seed=[3, 4])


@tf.function
def step():
    with tf.GradientTape() as tape:
        z = encoder(x)
        distances = tf.reduce_sum((z[:, None, :] - codebook[None]) ** 2, -1)
        loss = tf.reduce_mean(tf.reduce_min(distances, -1))
    grads = tape.gradient(loss, encoder.trainable_variables)
    optimizer.apply_gradients(zip(grads, encoder.trainable_variables))
    return loss


for _ in range(2):
    step()
