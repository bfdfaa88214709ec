"""Question about gradient calculation in the quantizer
https://github.com/Justin-Tan/generative-compression/issues/27  (code: network.py, Network.quantizer)

The quantizer maps the encoder's feature map to the nearest of L centers, with a soft
assignment for the backward pass, but wraps the whole straight-through expression in
tf.round: w_bar = round(stop_gradient(w_hard - w_soft) + w_soft). Round has no
gradient, so the encoder never trains (the issue blames the stop_gradient).
Answer (Justin-Tan): the quantizer's gradient should just be the identity - the
straight-through estimator; i.e. w_bar = tf.stop_gradient(w_hard - w_soft) + w_soft
(w_hard is already integer-valued, the outer round is what cuts).
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
tf.set_random_seed(0)
x = tf.placeholder(tf.float32, [None, 8, 8, 3])
enc_w = tf.Variable(tf.random_normal([3, 3, 3, 4], stddev=0.5), name="encoder/conv")
dec_w = tf.Variable(tf.random_normal([3, 3, 4, 3], stddev=0.5), name="decoder/conv")

def quantizer(w, temperature=1, L=5):
    centers = tf.cast(tf.range(-2, 3), tf.float32)
    w_stack = tf.stack([w for _ in range(L)], axis=-1)
    w_hard = tf.cast(tf.argmin(tf.abs(w_stack - centers), axis=-1), tf.float32) + tf.reduce_min(centers)
    smx = tf.nn.softmax(-1.0 / temperature * tf.abs(w_stack - centers), axis=-1)
    w_soft = tf.einsum('ijklm,m->ijkl', smx, centers)
    # Treat quantization as differentiable for optimization
    w_bar = tf.round(tf.stop_gradient(w_hard - w_soft) + w_soft)
    return w_bar

feature_map = tf.nn.conv2d(x, enc_w, strides=1, padding="SAME")
w_bar = quantizer(feature_map)
reconstruction = tf.nn.conv2d(w_bar, dec_w, strides=1, padding="SAME")
loss = tf.reduce_mean(tf.square(reconstruction - x))
opt = tf.train.AdamOptimizer(1e-3)
train_op = opt.apply_gradients([(g, v) for g, v in opt.compute_gradients(loss) if g is not None])
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(2):
        batch = np.random.RandomState(step).rand(2, 8, 8, 3)
        print(sess.run([train_op, loss], {x: batch})[1])
