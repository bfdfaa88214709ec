"""A Keras 3 text classifier with a layer that is built but never called.

`build()` creates a BERT-style `pooler`, but `call()` was later switched to mean pooling and
no longer uses it. Keras still tracks the pooler's weights as trainable, so `model.fit` warns
"Gradients do not exist for variables [...]" at every step. gradcheck names them before any
training: `text_classifier/pooler/kernel` and `text_classifier/pooler/bias` are unused.

The loss is a zero-argument `tf.function` on a fixed, seeded random batch, so no data is needed.

    gradcheck sample_models/keras_unused_layer.py --loss loss      # exits 1
"""

import keras
import numpy as np
import tensorflow as tf

VOCAB_SIZE = 100
SEQUENCE_LENGTH = 12
EMBEDDING_DIM = 16
NUM_CLASSES = 3


class TextClassifier(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(name="text_classifier", **kwargs)
        self.embedding = keras.layers.Embedding(VOCAB_SIZE, EMBEDDING_DIM, name="embedding")
        self.encoder = keras.layers.Dense(EMBEDDING_DIM, activation="relu", name="encoder")
        self.pooler = keras.layers.Dense(EMBEDDING_DIM, activation="tanh", name="pooler")
        self.classifier = keras.layers.Dense(NUM_CLASSES, name="classifier")

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.encoder.build((None, SEQUENCE_LENGTH, EMBEDDING_DIM))
        self.pooler.build((None, EMBEDDING_DIM))
        self.classifier.build((None, EMBEDDING_DIM))

    def call(self, token_ids):
        sequence = self.encoder(self.embedding(token_ids))
        # Mean pooling replaced `self.pooler(sequence[:, 0])`; the pooler is never called.
        pooled = keras.ops.mean(sequence, axis=1)
        return self.classifier(pooled)


model = TextClassifier()
model.build((None, SEQUENCE_LENGTH))

rng = np.random.default_rng(0)
token_ids = rng.integers(0, VOCAB_SIZE, size=(32, SEQUENCE_LENGTH)).astype("int32")
labels = rng.integers(0, NUM_CLASSES, size=(32,)).astype("int32")
cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def loss():
    return cross_entropy(labels, model(token_ids, training=True))


if __name__ == "__main__":
    # Keras warns that the pooler's variables have no gradient.
    model.compile(optimizer="adam", loss=cross_entropy)
    model.fit(token_ids, labels, epochs=2, verbose=2)
