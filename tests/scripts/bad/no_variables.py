import tensorflow as tf
x = tf.constant([1.0, 2.0])


@tf.function
def loss():
    return tf.reduce_sum(x * 2.0)
