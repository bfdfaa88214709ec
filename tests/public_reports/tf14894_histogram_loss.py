"""'No gradients provided for any variable, check your graph for ops that do not support gradients'
https://github.com/tensorflow/tensorflow/issues/14894
(fix from https://github.com/deepfakes/faceswap-model/issues/27)

The user matches two histograms: tf.histogram_fixed_width of two variables, cast to float,
2*l2_loss of the difference, AdamOptimizer.minimize (TF1) -> "No gradients provided".
histogram_fixed_width returns int32 bin counts, so no gradient reaches the variables.
Fix (iperov, faceswap-model#27: "tf.histogram_fixed_width is not differentiable to use in
loss func. I created differentiable version"): build the histogram from clipped ramps,
y = clip((x - v) * 1000, -1, 0) + 1 per bin edge v, summed, instead of counting.
"""
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
input1 = tf.Variable([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], name='input1')
input2 = tf.Variable([2.0, 3.0, 4.0, 6.0, 8.0, 9.0], name='input2')
values_range = tf.constant([0., 10.], dtype=tf.float32)

def hist(x):
    return tf.histogram_fixed_width(tf.to_float(x), values_range, 11)

source_hist = hist(input1)
template_hist = hist(input2)
source_hist = tf.cast(source_hist, tf.float32)
template_hist = tf.cast(template_hist, tf.float32)
loss = 2 * tf.nn.l2_loss(source_hist - template_hist)
opt = tf.train.AdamOptimizer(0.001)
gv = [(g, v) for g, v in opt.compute_gradients(loss) if g is not None]
train_step = opt.apply_gradients(gv) if gv else tf.no_op()
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(2):
        sess.run(train_step)
        print('loss', sess.run(loss), 'input1_value', sess.run(input1))
