"""The real models the benchmarks measure, written as SavedModels by TensorFlow in a subprocess
(no downloads: keras.applications and keras_hub from their configs, `weights=None`), and kept
in the cache folder so that each is built once."""

from __future__ import annotations

import enum
import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.synthetic import run_fresh_python

HUGE_VARIABLE_BYTES = 2 * 1024**3 + 4 * 1024**2
"""The extra variable of `resnet50-2gb`: a little over 2 GiB of float32 on disk."""


class Model(str, enum.Enum):
    RESNET50 = "resnet50"
    EFFICIENTNETB0 = "efficientnetb0"
    CONVNEXT_TINY = "convnext-tiny"
    BERT_BASE = "bert-base"
    RESNET50_2GB = "resnet50-2gb"


# Each program gets the output folder as argv[1] and saves a root object whose `loss` is a
# tf.function with an input signature, like benchmarks' first ResNet50 script did. The loss is
# what training would minimise, so every trainable variable should be `ok`.
_IMAGE_CLASSIFIER = """
import sys
import keras
import tensorflow as tf

model = keras.applications.{application}(weights=None)
extra_floats = {extra_floats}


class Loss(tf.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.all_variables = list(model.variables)
        if extra_floats:
            # Written in one piece: a zeros initializer would hold the 2 GiB twice.
            self.huge = tf.Variable(tf.zeros([extra_floats]), name="huge")

    @tf.function(input_signature=[tf.TensorSpec([2, 224, 224, 3]), tf.TensorSpec([2], tf.int64)])
    def loss(self, images, labels):
        logits = self.model(images, training=True)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, logits))
        if extra_floats:
            loss += 1e-9 * tf.reduce_sum(self.huge)
        return loss


options = tf.saved_model.SaveOptions(save_debug_info=True)
tf.saved_model.save(Loss(model), sys.argv[1], options=options)
"""

# BERT base: 12 layers, 12 heads, hidden 768, intermediate 3072, WordPiece vocabulary 30522.
_BERT_BASE = """
import sys
import keras_hub
import tensorflow as tf

backbone = keras_hub.models.BertBackbone(
    vocabulary_size=30522,
    num_layers=12,
    num_heads=12,
    hidden_dim=768,
    intermediate_dim=3072,
    max_sequence_length=512,
)
tokens = tf.TensorSpec([2, 128], tf.int32)


class Loss(tf.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.all_variables = list(backbone.variables)

    @tf.function(input_signature=[tokens, tokens, tokens])
    def loss(self, token_ids, segment_ids, padding_mask):
        outputs = self.backbone(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            training=True,
        )
        return tf.reduce_mean(tf.square(outputs["sequence_output"])) + tf.reduce_mean(
            tf.square(outputs["pooled_output"])
        )


options = tf.saved_model.SaveOptions(save_debug_info=True)
tf.saved_model.save(Loss(backbone), sys.argv[1], options=options)
"""

_PROGRAMS = {
    Model.RESNET50: _IMAGE_CLASSIFIER.format(application="ResNet50", extra_floats=0),
    Model.EFFICIENTNETB0: _IMAGE_CLASSIFIER.format(application="EfficientNetB0", extra_floats=0),
    Model.CONVNEXT_TINY: _IMAGE_CLASSIFIER.format(application="ConvNeXtTiny", extra_floats=0),
    Model.BERT_BASE: _BERT_BASE,
    Model.RESNET50_2GB: _IMAGE_CLASSIFIER.format(
        application="ResNet50", extra_floats=HUGE_VARIABLE_BYTES // 4
    ),
}


def saved_model(model: Model, cache: Path) -> Path:
    """The model's SavedModel folder in `cache`, written on first use (in a fresh process)."""
    versions = "-".join(
        f"{package}{importlib.metadata.version(package)}"
        for package in ("tensorflow", "keras", "keras-hub")
    )
    # A changed program is a new model: a hash of its text is part of the folder's name.
    program = _PROGRAMS[model]
    digest = hashlib.sha256(program.encode()).hexdigest()[:10]
    folder = cache / versions / f"{model.value}-{digest}"
    if not (folder / "saved_model.pb").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        # Written beside, then renamed: an interrupted build is never taken for a model.
        scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{model.value}-"))
        try:
            run_fresh_python(["-c", program, str(scratch / "model")])
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(scratch / "model", folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return folder


def size_on_disk(folder: Path) -> int:
    """Bytes of every file under `folder`."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
