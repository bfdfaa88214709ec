"""'no gradients provided' for simple affine flow with tf.variables and eager execution
https://github.com/tensorflow/probability/issues/345

Following Eric Jang's normalizing-flow tutorial in eager mode, the user built the affine bijector
once, before training: `scale_tril=tfb.FillTriangular().forward(L)`, then minimized
`loss = lambda: -tf.reduce_mean(dist.log_prob(x))` with `tf.train.AdamOptimizer(1e-3).minimize(loss)`.
FillTriangular ran once, eagerly, outside the optimizer's tape, so L gets no gradient (the shift,
read by the bijector at log_prob time, still trains). (tfb.Affine is gone from TFP; Shift and
ScaleMatvecTriL build the same bijector.) The change, as for distributions built outside a tape
(tensorflow/probability#285): build the bijector and the distribution inside the loss function.
"""
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd, tfb = tfp.distributions, tfp.bijectors
DTYPE = tf.float32
x = tf.constant(np.arange(20), shape=(10, 2), dtype=DTYPE)
base_dist = tfd.MultivariateNormalDiag(loc=tf.zeros([2], DTYPE))
shift = tf.Variable(tf.zeros([2], DTYPE), name="shift")
L = tf.Variable(tf.constant([1., 0.1, 1.], DTYPE), name="L")

bijector = tfb.Shift(shift)(tfb.ScaleMatvecTriL(scale_tril=tfb.FillTriangular().forward(L)))
dist = tfd.TransformedDistribution(base_dist, bijector)


def loss():
    return -tf.reduce_mean(dist.log_prob(x))


opt = tf.compat.v1.train.AdamOptimizer(1e-3)
for step in range(2):
    opt.minimize(loss, var_list=[shift, L])
    print(step, float(loss()), L.numpy())
