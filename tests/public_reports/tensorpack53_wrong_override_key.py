"""Quantize the weights to ternary (-1, 0 1)?
https://github.com/tensorpack/tensorpack/issues/53

The user's ternary weight quantizer (TF1, DoReFa style):
    E = tf.stop_gradient(tf.reduce_mean(tf.abs(x)))
    clip_x = tf.clip_by_value(x / E, -2.0, 2.0) / 2.0
    (under G.gradient_override_map({"Floor": "Identity"})) return tf.round(clip_x) * E
"it seems not converged": the override map is keyed "Floor" but the op built is Round, so
Round keeps its own (None) gradient and the quantized weights never train.
Fix: key the map by the op that is actually built, {"Round": "Identity"} (the identity,
straight-through gradient the map was meant to give, as in tensorpack's dorefa.py).
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
tf.set_random_seed(0)
G = tf.get_default_graph()

def ternarize(x):
    E = tf.stop_gradient(tf.reduce_mean(tf.abs(x)))
    clip_x = tf.clip_by_value(x / E, -2.0, 2.0) / 2.0
    with G.gradient_override_map({"Floor": "Identity"}):
        return tf.round(clip_x) * E

inp = tf.placeholder(tf.float32, [None, 10])
label = tf.placeholder(tf.int32, [None])
W = tf.get_variable("conv1/W", [10, 16])
fc = tf.get_variable("fc/W", [16, 4])
h = tf.nn.relu(tf.matmul(inp, ternarize(W)))
logits = tf.matmul(h, fc)
cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits))
opt = tf.train.AdamOptimizer(1e-3)
gv = [(g, v) for g, v in opt.compute_gradients(cost) if g is not None]
train_op = opt.apply_gradients(gv) if gv else tf.no_op()
rng = np.random.RandomState(0)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(2):
        print(sess.run([train_op, cost], {inp: rng.rand(8, 10), label: rng.randint(0, 4, 8)})[1])
