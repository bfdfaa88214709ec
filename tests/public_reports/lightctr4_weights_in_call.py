"""关于Gradients do not exist for variables告警 (Gradients do not exist for variables warning).

https://github.com/Hirosora/LightCTR/issues/4

LightCTR's blocks (CrossNetwork for DCN, also AutoInt, FiBiNET) create their parameter matrices
with self.add_weight(...) inside call(). The DCN model is a Keras 2 functional model: the block is
called once on the symbolic inputs when the model is built (creating one set of kernels), and
again when fit() runs the model (creating another set). The first set is still tracked but is
never read by the training graph, so fit warns "Gradients do not exist for variables ...".
(run_eagerly=True and the legacy Adam of that time keep current TF from refusing the second set of
variables outright, so the steps run as they did for the user.)
The issue's diagnosis: the weights are defined under call(); they belong in build()/__init__,
created once and read by call().
"""
import numpy as np
import tensorflow as tf
import tf_keras

tf.random.set_seed(0)


class CrossNetwork(tf_keras.layers.Layer):
    def call(self, inputs, layers_num=2):
        x0 = tf.expand_dims(inputs, axis=-1)
        x = tf.transpose(x0, [0, 2, 1])
        for i in range(layers_num):
            kernel = self.add_weight(shape=(x0.shape[1], 1), initializer="glorot_uniform", trainable=True)
            bias = self.add_weight(shape=(x0.shape[1], 1), initializer="zeros", trainable=True)
            x = tf.matmul(tf.matmul(x0, x), kernel) + bias + tf.transpose(x, [0, 2, 1])
            x = tf.transpose(x, [0, 2, 1])
        return tf.squeeze(x, axis=1)


inputs = tf_keras.Input(shape=(6,))
cross = CrossNetwork()(inputs)
output = tf_keras.layers.Dense(1, activation="sigmoid")(cross)
model = tf_keras.Model(inputs, output)
model.compile(optimizer=tf_keras.optimizers.legacy.Adam(), loss="binary_crossentropy", run_eagerly=True)

x = np.random.RandomState(0).randn(32, 6).astype("float32")
y = (np.random.RandomState(1).rand(32, 1) > 0.5).astype("float32")
model.fit(x, y, batch_size=16, epochs=1, verbose=2)
