"""The validation accuracy of Cifar-10 is almost 99%
https://github.com/tensorpack/tensorpack/issues/694

A DoReFa-Net variant quantizes the last activation with
tf.round(tf.clip_by_value(l, 0, 1) * (2**BITA - 1)) / (2**BITA - 1) but "mistakenly omitted
the gradient_override_map" ({"Round": "Identity"}) around it. tf.round has no gradient, so
every layer below the quantized logits gets none (TF1 graph).
Fix (the line the user left out, as in tensorpack's dorefa.py): build the round inside
G.gradient_override_map({"Round": "Identity"}) - a straight-through estimator.
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
tf.set_random_seed(0)
BITA = 2
G = tf.get_default_graph()
image = tf.placeholder(tf.float32, [None, 12])
label = tf.placeholder(tf.int32, [None])
w0 = tf.get_variable("fc0/W", [12, 16])
kernel = tf.get_variable("last_layer/kernel", [16, 10])
biases = tf.get_variable("last_layer/biases", [10], initializer=tf.zeros_initializer())
l = tf.nn.relu(tf.matmul(image, w0))
with tf.name_scope('last_layer') as scope:
    l = tf.matmul(l, kernel)
    l = tf.nn.bias_add(l, biases)
    # I omitted the code
    # with G.gradient_override_map({"Round": "Identity"}):
    l = tf.round(tf.clip_by_value(l, 0.0, 1.0) * float(2**BITA - 1)) / float(2**BITA - 1)
logits = tf.identity(l)
cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits))
opt = tf.train.MomentumOptimizer(0.01, 0.9)
gv = [(g, v) for g, v in opt.compute_gradients(cost) if g is not None]
train_op = opt.apply_gradients(gv) if gv else tf.no_op()
rng = np.random.RandomState(0)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(2):
        print(sess.run([train_op, cost], {image: rng.rand(8, 12), label: rng.randint(0, 10, 8)})[1])
