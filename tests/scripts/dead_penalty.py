"""Terms added to a cross-entropy: an argmax penalty that trains nothing (GC211), the same
penalty made soft as gradcheck advises, a comparison used as a mask, one-hot pseudo-labels and
a sigmoid cross-entropy on tf.zeros_like labels, whose `logits * labels` is a product with a
zero (all fine: no dead term)."""

import tensorflow as tf

kernel = tf.Variable(tf.random.stateless_normal([4, 3], seed=[1, 2]), name="kernel")
bias = tf.Variable(tf.zeros([3]), name="bias")
inputs = tf.random.stateless_normal([8, 4], seed=[3, 4])
labels = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])


def scores():
    return tf.matmul(inputs, kernel) + bias


def cross_entropy(logits):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))


@tf.function
def loss():
    logits = scores()
    penalty = tf.reduce_mean(tf.cast(tf.argmax(logits, axis=-1), tf.float32))
    return cross_entropy(logits) + 0.1 * penalty


@tf.function
def penalty_loss():
    logits = scores()
    return tf.reduce_mean(tf.cast(tf.argmax(logits, axis=-1), tf.float32))


@tf.function
def soft_penalty_loss():
    logits = scores()
    classes = tf.range(tf.shape(logits)[-1], dtype=tf.float32)
    penalty = tf.reduce_mean(tf.reduce_sum(tf.nn.softmax(logits) * classes, axis=-1))
    return cross_entropy(logits) + 0.1 * penalty


@tf.function
def soft_penalty_alone():
    logits = scores()
    classes = tf.range(tf.shape(logits)[-1], dtype=tf.float32)
    return tf.reduce_mean(tf.reduce_sum(tf.nn.softmax(logits) * classes, axis=-1))


@tf.function
def masked_loss():
    logits = scores()
    mask = tf.cast(logits > 0.0, tf.float32)
    return cross_entropy(logits) + tf.reduce_mean(mask * tf.square(logits))


@tf.function
def pseudo_label_loss():
    logits = scores()
    targets = tf.one_hot(tf.argmax(logits, axis=-1), 3)
    return cross_entropy(logits) + tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits(targets, logits)
    )


def zero_labels_term(logits):
    return tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.zeros_like(logits), logits=logits)
    )


@tf.function
def zero_labels_loss():
    logits = scores()
    return cross_entropy(logits) + zero_labels_term(logits)


@tf.function
def zero_labels_alone():
    return zero_labels_term(scores())
