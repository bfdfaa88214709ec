"""keras-io's simple MNIST convnet (Keras 3, compiled fit with a validation split), small:
random images and one-hot labels.
https://github.com/keras-team/keras-io/blob/master/examples/vision/mnist_convnet.py"""

import numpy as np
import keras
from keras import layers

num_classes = 10
input_shape = (28, 28, 1)

rng = np.random.default_rng(0)
x_train = rng.random((10, 28, 28)).astype("float32")
y_train = rng.integers(0, num_classes, 10)
x_train = np.expand_dims(x_train, -1)
y_train = keras.utils.to_categorical(y_train, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(4, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)

model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=4, epochs=1, validation_split=0.2, verbose=0)
