"""Gradients do not propagate when iterating over dataset in graph mode
https://github.com/tensorflow/tensorflow/issues/36306

The user computed a loss over a tf.data.Dataset with `ds.reduce(tf.constant(0.), lambda x, y:
x + (y - u) ** 2)` inside a GradientTape; the reduce function is traced into the dataset's own
graph, so the variable `u` it captures is read where the tape cannot see it, and its gradient is
None. The thread's working form (loss2 in the report) builds the same sum in the tape's own
context, iterating the dataset in Python: `tf.reduce_sum([(y - u) ** 2 for y in
ds.as_numpy_iterator()])`, which gives the correct gradient.
"""
import tensorflow as tf

data = tf.range(10, dtype=tf.float32)
ds = tf.data.Dataset.from_tensor_slices(data)
u = tf.Variable(1., dtype=tf.float32)
opt = tf.keras.optimizers.SGD(learning_rate=0.01)

for step in range(2):
    with tf.GradientTape() as g:
        loss = ds.reduce(tf.constant(0.), lambda x, y: x + (y - u) ** 2)
    grads = g.gradient(loss, [u])
    pairs = [(gr, v) for gr, v in zip(grads, [u]) if gr is not None]
    if pairs:
        opt.apply_gradients(pairs)
    print(step, float(loss), u.numpy())
