"""tf.Variables created inside a tf.function on its first call (the supported singleton idiom),
trained by a tape in the same function; one of them only feeds tf.round.

Source: https://github.com/tensorflow/tensorflow/issues/26812 ("Can't declare tf.Variable in
@tf.function decorated function"; the answer: create it once, guarded by `if self.v is None`,
per the tf.function RFC "functions that create state"). Added a second variable `q` whose only
use is tf.round(q) (https://github.com/tensorflow/tensorflow/issues/5888).
TF truth: w, b train; q gets None.
"""
import tensorflow as tf


class Trainer(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = None
        self.opt = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def step(self, x, y):
        if self.w is None:
            self.w = tf.Variable(tf.random.normal([3, 1]), name="w")
            self.b = tf.Variable(tf.zeros([1]), name="b")
            self.q = tf.Variable(0.4, name="q")
        with tf.GradientTape() as tape:
            pred = tf.matmul(x, self.w) + self.b + tf.round(self.q)
            loss = tf.reduce_mean((pred - y) ** 2)
        vs = [self.w, self.b, self.q]
        grads = tape.gradient(loss, vs)
        self.opt.apply_gradients([(g, v) for g, v in zip(grads, vs) if g is not None])
        return loss


t = Trainer()
x = tf.random.normal([4, 3])
y = tf.random.normal([4, 1])
for _ in range(2):
    t.step(x, y)
