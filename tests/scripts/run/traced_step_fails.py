"""A traced step that fails after asking for gradients: TensorFlow's error, raised while the
function is traced, says "in user code:" first and what went wrong last."""

import tensorflow as tf

w = tf.Variable(tf.ones([3, 1]), name="w")
x = tf.ones([4, 3])


@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(x @ w)
    grads = tape.gradient(loss, [w])
    return tf.reshape(grads[0], [5])  # three values do not make five


step()
