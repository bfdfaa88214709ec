"""A layer that creates its weight inside __call__, so every forward pass makes a new one.

Pattern: USER_CASES (g) "variables created inside call()"; related reports:
https://github.com/tensorflow/tensorflow/issues/26812 ("Can't declare tf.Variable in @tf.function")
and https://github.com/tensorflow/tensorflow/issues/27120. Adapted: a tf.Module "layer" (Keras 3
refuses add_weight() in call() and does not track raw tf.Variables), the model is built once,
the variable list is taken once, then an eager GradientTape step.
TF truth: scale/w (the copy in the list) gets None; the fresh copy made inside the tape is not
in the list; the dense weights train.
"""
import tensorflow as tf


class Scale(tf.Module):
    w = None

    def __call__(self, x):
        if self.w is None:
            self.w = tf.Variable(tf.ones([x.shape[-1]]), name="w")
        return x * self.w


class Net(tf.Module):
    def __init__(self):
        super().__init__(name="net")
        self.scale = Scale(name="scale")
        self.k = tf.Variable(tf.random.normal([3, 1]), name="k")
        self.b = tf.Variable(tf.zeros([1]), name="b")

    def __call__(self, x):
        return tf.matmul(self.scale(x), self.k) + self.b


net = Net()
x = tf.random.normal([4, 3])
y = tf.random.normal([4, 1])
net(x)  # build
variables = net.trainable_variables
opt = tf.keras.optimizers.SGD(0.1)
for step in range(2):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((net(x) - y) ** 2)
    grads = tape.gradient(loss, variables)
    opt.apply_gradients([(g, v) for g, v in zip(grads, variables) if g is not None])
