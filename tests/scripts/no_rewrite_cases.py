"""Cuts that no rewrite fixes by construction: a teacher network under tf.stop_gradient (its
logits are not its kernel's shape), a selector whose argmax picks rows of a table (an index), and a
codebook inside a straight-through estimator without a loss term of its own."""

import tensorflow as tf

features = tf.random.stateless_normal([8, 4], seed=[0, 1])
teacher_kernel = tf.Variable(tf.random.stateless_normal([4, 3], seed=[1, 2]), name="teacher")
student_kernel = tf.Variable(tf.random.stateless_normal([4, 3], seed=[2, 3]), name="student")
table = tf.Variable(tf.random.stateless_normal([3, 2], seed=[3, 4]), name="table")
selector = tf.Variable(tf.random.stateless_normal([4, 3], seed=[5, 6]), name="selector")
codebook = tf.Variable(tf.random.stateless_normal([5, 3], seed=[4, 5]), name="codebook")


def teacher(x):
    return tf.matmul(x, teacher_kernel)


@tf.function
def loss():
    student = tf.matmul(features, student_kernel)
    distill = tf.reduce_mean(tf.square(student - tf.stop_gradient(teacher(features))))
    picked = tf.gather(table, tf.argmax(tf.matmul(features, selector), axis=-1))
    nearest = tf.gather(codebook, tf.argmin(tf.reduce_sum(student, -1, keepdims=True), -1))
    quantized = student + tf.stop_gradient(nearest - student)
    return distill + tf.reduce_mean(picked) + tf.reduce_mean(quantized)
