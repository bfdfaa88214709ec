"""TensorFlow's basic text classification tutorial run on Keras 2 (TF_USE_LEGACY_KERAS=1 makes
tf.keras tf_keras): TextVectorization adapted on the text, an embedding bag, a compiled fit with
a validation set; small: a few made-up reviews instead of the IMDB download.
https://github.com/tensorflow/docs/blob/master/site/en/tutorials/keras/text_classification.ipynb"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"

import re
import string

import tensorflow as tf
from tensorflow.keras import layers, losses

reviews = [
    "A wonderful film<br />with great acting.",
    "Terrible plot, boring and too long!",
    "I loved every minute of it.",
    "The worst movie I have seen this year.",
    "Great fun for the whole family.",
    "Dull, slow and badly written.",
]
labels = [1, 0, 1, 0, 1, 0]
raw_train_ds = tf.data.Dataset.from_tensor_slices((reviews, labels)).batch(3)
raw_val_ds = raw_train_ds


def custom_standardization(input_data):
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, "[%s]" % re.escape(string.punctuation), "")


max_features = 100
sequence_length = 12

vectorize_layer = layers.TextVectorization(
    standardize=custom_standardization,
    max_tokens=max_features,
    output_mode="int",
    output_sequence_length=sequence_length,
)
train_text = raw_train_ds.map(lambda x, y: x)
vectorize_layer.adapt(train_text)


def vectorize_text(text, label):
    text = tf.expand_dims(text, -1)
    return vectorize_layer(text), label


train_ds = raw_train_ds.map(vectorize_text).cache()
val_ds = raw_val_ds.map(vectorize_text).cache()

embedding_dim = 8
model = tf.keras.Sequential(
    [
        layers.Embedding(max_features, embedding_dim),
        layers.Dropout(0.2),
        layers.GlobalAveragePooling1D(),
        layers.Dropout(0.2),
        layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile(
    loss=losses.BinaryCrossentropy(),
    optimizer="adam",
    metrics=[tf.metrics.BinaryAccuracy(threshold=0.5)],
)
history = model.fit(train_ds, validation_data=val_ds, epochs=1, verbose=0)
