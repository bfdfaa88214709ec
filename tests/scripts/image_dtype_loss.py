"""A loss on an image made uint8 by tf.image.convert_image_dtype: the cast is the library's
dtype conversion, so the fix keeps the values floating point."""

import tensorflow as tf

w = tf.Variable(tf.ones([4, 4, 3]), name="w")


@tf.function(input_signature=[tf.TensorSpec([4, 4, 3], tf.float32)])
def loss(target):
    image = tf.sigmoid(w * 2.0)
    pixels = tf.image.convert_image_dtype(image, tf.uint8, saturate=True)
    return tf.reduce_mean(tf.square(tf.cast(pixels, tf.float32) / 255.0 - target))
