"""A deep dream: every gradient request is with respect to the image, none with respect to a
trainable variable; the image changes, no weight does."""

import tensorflow as tf

model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(4)])
image = tf.Variable(tf.random.stateless_normal([1, 8], seed=[1, 2]), trainable=False)
for _step in range(6):
    img = tf.convert_to_tensor(image)
    with tf.GradientTape() as tape:
        tape.watch(img)
        activation = tf.reduce_sum(model(img))
    gradient = tape.gradient(activation, img)
    image.assign_add(0.1 * gradient)
