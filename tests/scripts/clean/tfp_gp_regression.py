"""TensorFlow Probability's Gaussian process regression: kernel parameters held by
TransformedVariables, fitted by maximum likelihood in a tf.function tape step with a tf_keras
optimizer; small: 10 random points, one step.
https://github.com/tensorflow/probability/blob/main/tensorflow_probability/examples/jupyter_notebooks/Gaussian_Process_Regression_In_TFP.ipynb"""

import numpy as np
import tensorflow as tf
import tf_keras
import tensorflow_probability as tfp

tfb = tfp.bijectors
tfd = tfp.distributions
tfk = tfp.math.psd_kernels


def sinusoid(x):
    return np.sin(3 * np.pi * x[..., 0])


def generate_1d_data(num_training_points, observation_noise_variance):
    index_points_ = np.random.uniform(-1.0, 1.0, (num_training_points, 1))
    index_points_ = index_points_.astype(np.float64)
    observations_ = sinusoid(index_points_) + np.random.normal(
        loc=0, scale=np.sqrt(observation_noise_variance), size=(num_training_points)
    )
    return index_points_, observations_


np.random.seed(0)
observation_index_points_, observations_ = generate_1d_data(
    num_training_points=10, observation_noise_variance=0.1
)


def build_gp(amplitude, length_scale, observation_noise_variance):
    kernel = tfk.ExponentiatedQuadratic(amplitude, length_scale)
    return tfd.GaussianProcess(
        kernel=kernel,
        index_points=observation_index_points_,
        observation_noise_variance=observation_noise_variance,
    )


gp_joint_model = tfd.JointDistributionNamed(
    {
        "amplitude": tfd.LogNormal(loc=0.0, scale=np.float64(1.0)),
        "length_scale": tfd.LogNormal(loc=0.0, scale=np.float64(1.0)),
        "observation_noise_variance": tfd.LogNormal(loc=0.0, scale=np.float64(1.0)),
        "observations": build_gp,
    }
)

x = gp_joint_model.sample()
lp = gp_joint_model.log_prob(x)

constrain_positive = tfb.Shift(np.finfo(np.float64).tiny)(tfb.Exp())

amplitude_var = tfp.util.TransformedVariable(
    initial_value=1.0, bijector=constrain_positive, name="amplitude", dtype=np.float64
)
length_scale_var = tfp.util.TransformedVariable(
    initial_value=1.0, bijector=constrain_positive, name="length_scale", dtype=np.float64
)
observation_noise_variance_var = tfp.util.TransformedVariable(
    initial_value=1.0,
    bijector=constrain_positive,
    name="observation_noise_variance_var",
    dtype=np.float64,
)

trainable_variables = [
    v.trainable_variables[0]
    for v in [amplitude_var, length_scale_var, observation_noise_variance_var]
]


def target_log_prob(amplitude, length_scale, observation_noise_variance):
    return gp_joint_model.log_prob(
        {
            "amplitude": amplitude,
            "length_scale": length_scale,
            "observation_noise_variance": observation_noise_variance,
            "observations": observations_,
        }
    )


num_iters = 2
optimizer = tf_keras.optimizers.Adam(learning_rate=0.01)


@tf.function(autograph=False, jit_compile=False)
def train_model():
    with tf.GradientTape() as tape:
        loss = -target_log_prob(amplitude_var, length_scale_var, observation_noise_variance_var)
    grads = tape.gradient(loss, trainable_variables)
    optimizer.apply_gradients(zip(grads, trainable_variables))
    return loss


lls_ = np.zeros(num_iters, np.float64)
for i in range(num_iters):
    loss = train_model()
    lls_[i] = loss
