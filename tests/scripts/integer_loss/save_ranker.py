"""Writes a SavedModel (with its source lines) whose `loss` is an int32 rank: python
save_ranker.py OUT."""

import sys

import tensorflow as tf


class Ranker(tf.Module):
    def __init__(self):
        super().__init__()
        self.scorer = tf.Variable(tf.random.normal([4, 3], seed=1), name="scorer")
        self.labels = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])

    @tf.function(input_signature=[tf.TensorSpec([8, 4], tf.float32)])
    def loss(self, features):
        ranks = tf.argsort(tf.matmul(features, self.scorer), axis=-1)
        return tf.reduce_sum(tf.abs(ranks[:, 0] - self.labels))


if __name__ == "__main__":
    options = tf.saved_model.SaveOptions(save_debug_info=True)
    tf.saved_model.save(Ranker(), sys.argv[1], options=options)
