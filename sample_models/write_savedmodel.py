"""Write a SavedModel whose loss cannot train two of its variables.

    python sample_models/write_savedmodel.py /tmp/bucketed_regressor
    gradcheck /tmp/bucketed_regressor --loss loss                  # exits 1

The model is a linear regressor plus a learned per-bucket correction. Two variables never train:
- `bucket_offset` shifts the bucket boundaries, but the bucket ids come from a cast to int32
  inside the nested `tf.function` `bucket_ids`, and integer tensors carry no gradient;
- `outlier_threshold` is only read in the predicate of a `tf.cond` (Huber or squared error),
  and a comparison has no gradient.
`kernel`, `bias` and `bucket_embedding` train; `num_updates` is not trainable.

The SavedModel is written with `save_debug_info=True`, so gradcheck can point at the lines of
this file. Importing this module builds the model and writes nothing.
"""

import sys

import numpy as np
import tensorflow as tf

NUM_FEATURES = 4
NUM_BUCKETS = 8


class BucketedRegressor(tf.Module):
    def __init__(self, seed=0):
        super().__init__(name="bucketed_regressor")
        rng = np.random.default_rng(seed)
        self.kernel = tf.Variable(
            rng.normal(size=[NUM_FEATURES, 1]).astype(np.float32), name="kernel"
        )
        self.bias = tf.Variable(tf.zeros([1]), name="bias")
        self.bucket_offset = tf.Variable(0.5, name="bucket_offset")
        self.bucket_embedding = tf.Variable(tf.zeros([NUM_BUCKETS, 1]), name="bucket_embedding")
        self.outlier_threshold = tf.Variable(1.0, name="outlier_threshold")
        self.num_updates = tf.Variable(0, trainable=False, name="num_updates")

    @tf.function
    def bucket_ids(self, features):
        # The cast to int32 cuts the gradient to bucket_offset.
        ids = tf.cast(features[:, 0] * 2.0 + self.bucket_offset, tf.int32)
        return tf.clip_by_value(ids, 0, NUM_BUCKETS - 1)

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, NUM_FEATURES], tf.float32, name="features"),
            tf.TensorSpec([None, 1], tf.float32, name="targets"),
        ]
    )
    def loss(self, features, targets):
        predictions = (
            tf.matmul(features, self.kernel)
            + self.bias
            + tf.gather(self.bucket_embedding, self.bucket_ids(features))
        )
        errors = predictions - targets
        # The threshold only decides which branch runs; neither branch reads it.
        return tf.cond(
            tf.reduce_max(tf.abs(errors)) > self.outlier_threshold,
            lambda: tf.reduce_mean(huber(errors)),
            lambda: tf.reduce_mean(tf.square(errors)),
        )


def huber(errors, delta=1.0):
    absolute = tf.abs(errors)
    return tf.where(absolute < delta, 0.5 * tf.square(errors), delta * (absolute - 0.5 * delta))


model = BucketedRegressor()
loss = model.loss  # so `gradcheck sample_models/write_savedmodel.py --loss loss` works too


def main(out_dir):
    tf.saved_model.save(model, out_dir, options=tf.saved_model.SaveOptions(save_debug_info=True))
    print(f"wrote {out_dir}; run: gradcheck {out_dir} --loss loss")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python write_savedmodel.py OUT_DIR")
    main(sys.argv[1])
