"""A compiled classifier: a frozen backbone (`trainable = False`) under a trainable head.

Every trainable weight trains; the backbone's weights are frozen, which is never an error.

    gradcheck frozen_backbone.py --loss model      # exits 0
"""

import keras
from keras import layers

FEATURES = 8
CLASSES = 3


def build_model():
    backbone = keras.Sequential(
        [
            layers.Dense(16, activation="relu", name="backbone_dense_1"),
            layers.BatchNormalization(name="backbone_norm"),
            layers.Dense(16, activation="relu", name="backbone_dense_2"),
        ],
        name="backbone",
    )
    backbone.trainable = False
    inputs = keras.Input((FEATURES,), name="features")
    hidden = layers.Dense(16, activation="relu", name="head_hidden")(backbone(inputs))
    outputs = layers.Dense(CLASSES, name="head_logits")(hidden)
    classifier = keras.Model(inputs, outputs, name="classifier")
    classifier.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return classifier


model = build_model()
