"""An eager training step whose ranking loss is an int32 tensor."""

import tensorflow as tf

scorer = tf.Variable(tf.random.normal([4, 3], seed=1), name="scorer")
bias = tf.Variable(tf.zeros([3]), name="bias")
features = tf.random.normal([8, 4], seed=2)
labels = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])
optimizer = tf.keras.optimizers.SGD(0.1)

for _ in range(2):
    with tf.GradientTape() as tape:
        scores = tf.matmul(features, scorer) + bias
        ranks = tf.argsort(scores, axis=-1)
        loss = tf.reduce_sum(tf.abs(ranks[:, 0] - labels))
    gradients = tape.gradient(loss, [scorer, bias])
    optimizer.apply_gradients(zip(gradients, [scorer, bias]))
