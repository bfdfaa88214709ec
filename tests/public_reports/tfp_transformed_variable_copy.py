"""No gradients when using bijector and TransformedVariable
https://github.com/tensorflow/probability/issues/1167

Inside the GradientTape the user wrapped existing variables in TransformedVariable, passing
`tfp.util.TransformedVariable(scale_1, tfp.bijectors.Exp(), ...)` as each Normal's scale.
TransformedVariable does not transform scale_1 on each use: it creates a NEW variable and copies
Exp.inverse(scale_1) into it as its initial value, so the distribution reads the new variable and
the gradients with respect to scale_1 and scale_2 (named logscale_*) are None. No answer is in the
stored excerpt; the variables are log-scales, so read them through a deferred transform instead,
`tfp.util.DeferredTensor(scale_1, tf.exp)`, which applies exp to scale_1 each time it is used.
"""
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions
loc_1 = tf.Variable(5., name='loc_1')
loc_2 = tf.Variable(11., name='loc_2')
scale_1 = tf.Variable(2., name='logscale_1')
scale_2 = tf.Variable(3., name='logscale_2')
opt = tf.keras.optimizers.Adam(0.1)
params = [loc_1, loc_2, scale_1, scale_2]

for step in range(2):
    with tf.GradientTape() as tape:
        joint = tfd.JointDistributionSequential([
            tfd.Normal(loc=loc_1, scale=tfp.util.TransformedVariable(scale_1, tfp.bijectors.Exp(), name='scale_1')),
            tfd.Normal(loc=loc_2, scale=tfp.util.TransformedVariable(scale_2, tfp.bijectors.Exp(), name='scale_2')),
            lambda a, b: tfd.Independent(tfd.Poisson(rate=a + b, validate_args=True), 0),
        ])
        nll = -joint.log_prob([8., 12., 20.])
    grads = tape.gradient(nll, params)
    opt.apply_gradients([(g, v) for g, v in zip(grads, params) if g is not None])
    print(step, float(nll), [g is None for g in grads])
