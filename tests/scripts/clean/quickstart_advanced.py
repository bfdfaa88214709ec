"""TensorFlow 2 quickstart for experts: a subclassed model and a tf.function train_step,
small: random images and labels.
https://github.com/tensorflow/docs/blob/master/site/en/tutorials/quickstart/advanced.ipynb"""

import tensorflow as tf
from tensorflow.keras import Model
from tensorflow.keras.layers import Conv2D, Dense, Flatten

x_train = tf.random.uniform([8, 28, 28, 1])
y_train = tf.random.uniform([8], maxval=10, dtype=tf.int64)
train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(8).batch(4)
test_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(4)


class MyModel(Model):
    def __init__(self):
        super().__init__()
        self.conv1 = Conv2D(4, 3, activation="relu")
        self.flatten = Flatten()
        self.d1 = Dense(16, activation="relu")
        self.d2 = Dense(10)

    def call(self, x):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        return self.d2(x)


model = MyModel()

loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam()

train_loss = tf.keras.metrics.Mean(name="train_loss")
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
test_loss = tf.keras.metrics.Mean(name="test_loss")
test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")


@tf.function
def train_step(images, labels):
    with tf.GradientTape() as tape:
        predictions = model(images, training=True)
        loss = loss_object(labels, predictions)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    train_loss(loss)
    train_accuracy(labels, predictions)


@tf.function
def test_step(images, labels):
    predictions = model(images, training=False)
    t_loss = loss_object(labels, predictions)
    test_loss(t_loss)
    test_accuracy(labels, predictions)


for epoch in range(1):
    train_loss.reset_state()
    train_accuracy.reset_state()
    test_loss.reset_state()
    test_accuracy.reset_state()
    for images, labels in train_ds:
        train_step(images, labels)
    for test_images, test_labels in test_ds:
        test_step(test_images, test_labels)
