"""Variables that reach the loss only through their shape, or through a gradient that is zero
by construction (a constant zero factor, even behind identities, a constant tf.where, a slice
that leaves them out)."""

import tensorflow as tf


class ShapeAndZeroUses(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        start = [[0.5, -1.0], [1.5, 2.0]]
        self.live = tf.Variable(start, name="live")
        for name in (
            "zeros_like_only",
            "ones_like_only",
            "shape_only",
            "size_only",
            "rank_only",
            "times_zero",
            "times_zeros_like",
            "times_copied_zero",
            "where_never_taken",
            "stacked_away",
            "concatenated_away",
            "gathered_away",
        ):
            setattr(self, name, tf.Variable(start, name=name))

    @tf.function(input_signature=[])
    def loss(self) -> tf.Tensor:
        total = tf.reduce_sum(tf.matmul(self.x, self.live))
        total += tf.reduce_sum(tf.zeros_like(self.zeros_like_only))
        total += tf.reduce_sum(tf.ones_like(self.ones_like_only))
        total += tf.cast(tf.reduce_sum(tf.shape(self.shape_only)), tf.float32)
        total += tf.cast(tf.size(self.size_only), tf.float32)
        total += tf.cast(tf.rank(self.rank_only), tf.float32)
        total += tf.reduce_sum(0.0 * self.times_zero)
        total += tf.reduce_sum(tf.zeros_like(self.x) * self.times_zeros_like)
        # A zero behind identities, beside a product of the same kind that trains `live`.
        total += tf.reduce_sum(tf.identity(tf.identity(0.0)) * self.times_copied_zero)
        total += tf.reduce_sum(self.x * self.live)
        total += tf.reduce_sum(tf.where(tf.constant(True), self.live, self.where_never_taken))
        total += tf.reduce_sum(tf.stack([self.x, self.stacked_away])[0])
        total += tf.reduce_sum(tf.concat([self.live, self.concatenated_away], 0)[:2])
        rows = tf.stack([self.live, self.gathered_away, self.x])
        total += tf.reduce_sum(tf.gather(rows, [0, 2]))
        return total


model = ShapeAndZeroUses()
