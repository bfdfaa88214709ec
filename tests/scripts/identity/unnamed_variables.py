"""Seven tf.Variables without a name (TensorFlow calls every one `Variable`), five of them given
to the step's gradient request: two train, one is cut by a stop_gradient, one by an integer
cast, one is never read. Of the two no request lists, the loss reads one (`prior_scale`).

`python unnamed_variables.py` trains in an eager loop, `... function` in a tf.function step;
`gradcheck unnamed_variables.py --loss loss` checks the loss alone. Cells (`# %%`) make the
notebook form.
"""

# %%
import os
import sys
from pathlib import Path

import tensorflow as tf

x = tf.constant([[1.0, 2.0], [3.0, 4.0]])

# %%
loc = tf.Variable(tf.zeros([2]))
scale = tf.Variable(tf.ones([2]))
temperature = tf.Variable(1.0)
bins = tf.Variable(tf.ones([2]))
spare = tf.Variable(tf.zeros([3]))
prior_scale = tf.Variable(tf.ones([2]))
prior_loc = tf.Variable(tf.zeros([2]))
trained = [loc, scale, temperature, bins, spare]


def loss():
    z = (x - loc) / scale
    t = tf.stop_gradient(temperature)
    counts = tf.cast(tf.cast(bins * 3.0, tf.int32), tf.float32)
    return tf.reduce_mean(prior_scale * z**2) * t + tf.reduce_sum(counts)


# %%
optimizer = tf.keras.optimizers.SGD(0.01)


def eager_step():
    with tf.GradientTape() as tape:
        value = loss()
    gradients = tape.gradient(value, trained)
    optimizer.apply_gradients(zip(gradients, trained))


function_step = tf.function(eager_step)

# %%
if __name__ == "__main__":
    step = function_step if sys.argv[1:] == ["function"] else eager_step
    for _ in range(2):
        step()
    Path(os.environ.get("GRADCHECK_TEST_MARKER", "trained.marker")).write_text("trained")
