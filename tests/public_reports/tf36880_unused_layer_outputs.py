"""No gradients for bias and kernels in Dense layer.

https://github.com/tensorflow/tensorflow/issues/36880

The user subclassed tf.keras.Model with four Dense layers (layer1..layer4) and trained it in an
eager GradientTape loop. call() ran the first three layers but returned layer4 applied to the
*input* x, so the outputs of layer1..layer3 were computed and thrown away; TensorFlow warned
"Gradients do not exist for variables ['.../layer1/kernel:0', ..., '.../layer3/bias:0']".
The answer (pandrey-fr): call() returns layer4(x), so the first three layers have no effect on
the predictions; chain them, output = layer1(x); output = layer2(output); ... return layer4(output).
"""
import numpy as np
import tensorflow as tf

tf.random.set_seed(0)


class Flight(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.layer1 = tf.keras.layers.Dense(16, activation="relu", name="layer1")
        self.layer2 = tf.keras.layers.Dense(16, activation="relu", name="layer2")
        self.layer3 = tf.keras.layers.Dense(16, activation="relu", name="layer3")
        self.layer4 = tf.keras.layers.Dense(1, name="layer4")

    def call(self, x):
        output = self.layer1(x)
        output = self.layer2(output)
        output = self.layer3(output)
        return self.layer4(x)


x = np.random.RandomState(0).randn(32, 8).astype("float32")
y = np.random.RandomState(1).randn(32, 1).astype("float32")
model = Flight()
optimizer = tf.keras.optimizers.Adam(1e-3)
for step in range(2):
    with tf.GradientTape() as tape:
        pred = model(x)
        loss = tf.reduce_mean(tf.square(y - pred))
    grads = tape.gradient(loss, model.trainable_variables)
    pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
    optimizer.apply_gradients(pairs)
    print(step, float(loss))
