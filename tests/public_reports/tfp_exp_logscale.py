"""Gradients are None (tensorflow/probability)
https://github.com/tensorflow/probability/issues/1165
(answer pattern: https://github.com/tensorflow/probability/issues/285)

The user built a JointDistributionSequential with `tfd.Normal(loc=loc_1, scale=tf.exp(logscale_1))`
before opening the GradientTape, then asked for gradients of `joint.log_prob(3, 5, 6)`:
the loc variables get gradients, logscale_1 and logscale_2 get None, because tf.exp ran once,
eagerly, outside the tape. The maintainers' answer for distributions built outside a tape
(davmre in #285): ops run by a Distribution constructor are only recorded if the constructor
runs in the tape's context: build (or .copy()) the distribution inside the tape.
"""
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions
loc_1 = tf.Variable([38.6], trainable=True, name="loc_1")
logscale_1 = tf.Variable([2.3], trainable=True, name="logscale_1")
loc_2 = tf.Variable([6.6], trainable=True, name="loc_2")
logscale_2 = tf.Variable([3.4], trainable=True, name="logscale_2")
a = tf.Variable([3.3], trainable=True, name="a")
b = tf.Variable([6.0], trainable=True, name="b")
opt = tf.keras.optimizers.Adam(0.1)
params = [loc_1, loc_2, logscale_1, logscale_2]

joint = tfd.JointDistributionSequential([
    tfd.Normal(loc=loc_1, scale=tf.exp(logscale_1)),
    tfd.Normal(loc=loc_2, scale=tf.exp(logscale_2)),
    lambda b1, b0: tfd.Independent(tfd.Normal(loc=b0 + b1 * 3, scale=a / b), reinterpreted_batch_ndims=1),
])
for step in range(2):
    with tf.GradientTape() as tape:
        ll = joint.log_prob(3., 5., [6.])
        loss = -ll
    grads = tape.gradient(loss, params)
    opt.apply_gradients([(g, v) for g, v in zip(grads, params) if g is not None])
    print(step, float(tf.reduce_sum(loss)))
