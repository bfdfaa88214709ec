"""No gradients for those params during predicting aligned position
https://github.com/giancds/tsf_nmt/issues/2  (code: tsf_nmt/attention.py, local attention)

Luong local-p attention predicts the aligned position pt = S * sigmoid(vp . tanh(Wp ht)),
then takes "only the integer part": tf.floor of pt. pt builds the window mask (idx < low,
idx > high) and the Gaussian exp(-(idx - pt)^2 / 2 sigma^2); after the floor neither carries
a gradient, so Wp and vp never train (TF1 graph, minimize).
Fix raised by the issue (Luong et al.: pt is a real number): do not floor pt, so the Gaussian
term is differentiable in pt and Wp, vp get gradients.
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
B, S, D, window_size = 4, 10, 8, 2
hidden_attn = tf.constant(np.random.RandomState(0).randn(B, S, D), tf.float32)
ht = tf.placeholder(tf.float32, [None, D])
target = tf.placeholder(tf.float32, [None, D])
with tf.variable_scope("AttentionLocal"):
    Wa = tf.get_variable("Wa", [D, D])
    Wp = tf.get_variable("Wp", [D, D])
    vp = tf.get_variable("AttnVp_0", [D])
s = tf.reduce_sum(hidden_attn * tf.expand_dims(tf.matmul(ht, Wa), 1), 2)   # scores B,S
pt = tf.reduce_sum(vp * tf.tanh(tf.matmul(ht, Wp)), 1, keepdims=True)
pt = tf.sigmoid(pt) * S
# now we get only the integer part of the values
pt = tf.floor(pt)
idx = tf.tile(tf.range(S, dtype=tf.float32)[None, :], [B, 1])
low, high = pt - window_size + 1, pt + window_size
m = tf.to_float(idx < low) + tf.to_float(idx > high)
mask = tf.to_float(tf.equal(m, 0.0))
masked_soft = tf.nn.softmax(s * mask)
e = tf.exp(-tf.pow(idx - pt, 2.0) / (2 * (window_size / 2.0) ** 2))
at = masked_soft * e
ds = tf.reduce_sum(tf.expand_dims(at, 2) * hidden_attn, 1)
loss = tf.reduce_mean(tf.square(ds - target))
opt = tf.train.GradientDescentOptimizer(0.1)
train_op = opt.apply_gradients([(g, v) for g, v in opt.compute_gradients(loss) if g is not None])
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    rng = np.random.RandomState(1)
    for step in range(2):
        print(sess.run([train_op, loss], {ht: rng.randn(B, D), target: rng.randn(B, D)})[1])
