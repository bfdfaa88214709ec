"""An eager loop whose model is called before the tape opens: the tape sees only the value the
call computed, a constant to it, and no weight gets a gradient."""

import tensorflow as tf

model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu"), tf.keras.layers.Dense(1)])
x = tf.random.stateless_normal([16, 3], seed=[1, 2])
y = tf.random.stateless_normal([16, 1], seed=[3, 4])
pred = model(x)


def gradients():
    """TensorFlow's gradients of the loop's first step, by variable path."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(pred - y))
    grads = tape.gradient(loss, model.trainable_variables)
    return {v.path: g for v, g in zip(model.trainable_variables, grads)}


if __name__ == "__main__":
    optimizer = tf.keras.optimizers.SGD(0.01)
    for _step in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(pred - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
