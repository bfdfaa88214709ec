"""Backpropagate through tf.data
https://github.com/tensorflow/tensorflow/issues/30672

The user wanted a learned transformation applied in the input pipeline: a trainable `gain`
used inside `dataset.map(...)`, with the model trained on what the dataset yields. tf.data runs
the map function in the dataset's own graph, outside the tape: the batches are data to the
loss, and `gain` gets no gradient. TensorFlow's answer: gradients do not go through tf.data;
apply the trainable part in the training step, on each batch.
"""
import tensorflow as tf

gain = tf.Variable(1.0, name="gain")
kernel = tf.Variable(tf.ones([3, 1]), name="kernel")
features = tf.random.normal([16, 3], seed=1)
targets = tf.random.normal([16, 1], seed=2)
dataset = tf.data.Dataset.from_tensor_slices((features, targets))
dataset = dataset.map(lambda x, y: (x * gain, y)).batch(8)
opt = tf.keras.optimizers.SGD(learning_rate=0.01)

for x, y in dataset:
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((tf.matmul(x, kernel) - y) ** 2)
    grads = tape.gradient(loss, [gain, kernel])
    opt.apply_gradients([(g, v) for g, v in zip(grads, [gain, kernel]) if g is not None])
