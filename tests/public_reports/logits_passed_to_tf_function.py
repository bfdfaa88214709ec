"""No gradients provided for any variable: ['cnn_model_14/conv2d_42/kernel:0', ...]
https://github.com/tensorflow/tensorflow/issues/28836

In the training loop the user ran the model on the batch, printed `logits->`, and passed the
logits into a `@tf.function` step: `train_step(logits, labels)`, which opens the GradientTape and
computes the loss from those logits. The forward pass ran before (and outside) the tape, so the
tape never saw the weights read: "No gradients provided for any variable". The change (no
maintainer diagnosis is in the stored thread; it is the same as keras-io#406's answer: the tape
must watch the forward pass): pass the images and call the model inside the tape.
"""
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)


class CNNModel(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.conv, self.flat = tf.keras.layers.Conv2D(4, 3, activation="relu"), tf.keras.layers.Flatten()
        self.dense = tf.keras.layers.Dense(10)

    def call(self, x):
        return self.dense(self.flat(self.conv(x)))

model = CNNModel()
cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
cnn_optimizer = tf.keras.optimizers.Adam(1e-3)


@tf.function
def train_step(logits, labels):
    with tf.GradientTape() as cnn_tape:
        loss = cross_entropy(labels, logits)
    gradient_of_cnn = cnn_tape.gradient(loss, model.trainable_variables)
    pairs = [(g, v) for g, v in zip(gradient_of_cnn, model.trainable_variables) if g is not None]
    if pairs:
        cnn_optimizer.apply_gradients(pairs)
    return loss


images = tf.random.normal([8, 8, 8, 1])
labels = tf.constant(np.random.RandomState(0).randint(0, 10, 8))
for epoch in range(2):
    logits = model(images)
    print('logits->', logits.shape, 'labels->', labels.shape)
    print(epoch, float(train_step(logits, labels)))
