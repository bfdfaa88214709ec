"""Losses whose value is not a float (a rank from tf.argsort, a tf.cast to int32, a bool, a
string), and a float loss computed from a rank: TensorFlow gives every variable None."""

import tensorflow as tf

scorer = tf.Variable(tf.random.normal([4, 3], seed=1), name="scorer")
bias = tf.Variable(tf.zeros([3]), name="bias")
features = tf.random.normal([8, 4], seed=2)
labels = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])


def scores():
    return tf.matmul(features, scorer) + bias


@tf.function
def rank_loss():
    ranks = tf.argsort(scores(), axis=-1)
    return tf.reduce_sum(tf.abs(ranks[:, 0] - labels))


@tf.function
def float_rank_loss():
    ranks = tf.argsort(scores(), axis=-1)
    return tf.reduce_mean(tf.cast(tf.abs(ranks[:, 0] - labels), tf.float32))


@tf.function
def cast_loss():
    error = tf.reduce_sum(tf.square(scores()))
    return tf.cast(error, tf.int32)


@tf.function
def bool_loss():
    return tf.reduce_any(scores() > 0.0)


@tf.function
def string_loss():
    return tf.strings.as_string(tf.reduce_sum(scores()))
