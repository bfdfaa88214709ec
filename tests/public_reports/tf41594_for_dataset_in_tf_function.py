"""tf.function breaks the gradient tape when looping over datasets
https://github.com/tensorflow/tensorflow/issues/41594

The user's training step, a tf.function, adds up a loss in a `for` loop over the dataset inside its
GradientTape. Autograph runs a `for` loop over a tf.data.Dataset inside tf.data itself (a scan
and a reduction of the dataset), where TensorFlow takes no gradient, so `par` gets None in graph
mode while the same code trains eagerly. Looping over the dataset's iterator, `for d in
iter(data):`, makes autograph run the loop as a tf.while_loop, which the gradient goes through.
"""
import tensorflow as tf

data = tf.data.Dataset.from_tensor_slices(tf.constant([1.0, 2.0, 3.0], dtype=tf.double))
par = tf.Variable(0.5, dtype=tf.double)
opt = tf.keras.optimizers.SGD(learning_rate=0.01)


@tf.function
def training_step(data, par):
    loss = tf.constant(0, dtype=tf.double)
    with tf.GradientTape() as tape:
        for d in data:
            loss += (d - par) ** 2
    grads = tape.gradient(loss, [par])
    opt.apply_gradients(zip(grads, [par]))
    return loss


for epoch in range(2):
    print(epoch, float(training_step(data, par)))
