"""Spatial transformer: gather at integer coordinates gives no gradient to the localisation net
https://github.com/kevinzakka/spatial-transformer-network/issues/19
https://github.com/tensorflow/models/issues/295

The sampler casts the transformed coordinates to int32 and samples with tf.gather; zachluo:
"tf.gradients(tf.gather(data, index), index) returns [None]". Sampling only at the cast
coordinates (nearest neighbour) leaves the localisation layer with no gradient.
Answer (ppwwyyxx, models#295): the gradient to the coordinates flows through the bilinear
weights wa = (x1_f - x) * (y1_f - y), ... built from the float coordinates; blend the four
gathered corners with them (tf.contrib.resampler does the same).
"""
import tensorflow as tf

tf.random.set_seed(0)
H = W = 8
loc = tf.keras.layers.Dense(6, kernel_initializer="zeros",
                            bias_initializer=tf.keras.initializers.Constant([1., 0, 0.1, 0, 1., 0.1]))
opt = tf.keras.optimizers.SGD(0.1)
xs, ys = tf.meshgrid(tf.linspace(-1., 1., W), tf.linspace(-1., 1., H))
grid = tf.stack([tf.reshape(xs, [-1]), tf.reshape(ys, [-1]), tf.ones([H * W])])

def sample(img, theta):
    xy = tf.matmul(tf.reshape(theta, [-1, 2, 3]), grid)          # B,2,HW
    x = tf.clip_by_value(0.5 * (xy[:, 0] + 1.) * (W - 1), 0., W - 1.001)
    y = tf.clip_by_value(0.5 * (xy[:, 1] + 1.) * (H - 1), 0., H - 1.001)
    x0, y0 = tf.cast(tf.floor(x), tf.int32), tf.cast(tf.floor(y), tf.int32)
    flat = tf.reshape(img, [-1, H * W])
    def at(yi, xi):
        return tf.gather(flat, yi * W + xi, batch_dims=1)
    return at(tf.cast(tf.round(y), tf.int32), tf.cast(tf.round(x), tf.int32))

@tf.function
def train_step(img, target):
    with tf.GradientTape() as tape:
        out = sample(img, loc(tf.reshape(img, [-1, H * W])))
        loss = tf.reduce_mean(tf.square(out - target))
    grads = tape.gradient(loss, loc.trainable_variables)
    pairs = [(g, v) for g, v in zip(grads, loc.trainable_variables) if g is not None]
    if pairs:
        opt.apply_gradients(pairs)
    return loss

img = tf.random.uniform([4, H, W])
print(float(train_step(img, tf.reshape(img, [-1, H * W]))))
