"""A Keras model's variables carry the same names in its SavedModel as in the live model.

The live form is `check_function` on the model's loss, which names Keras weights by their
`variable.path` as the script route does; the SavedModel form reads the protos alone.
TensorFlow's tape decides which variables are dead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli import check
from gradcheck_cli.api import check_function
from tests.tf_oracle_inprocess import dead_names, tf_verdicts, variable_name

BATCH = 2
SEQUENCE = 3
WIDTH = 4


@dataclass
class Subject:
    """A loss over a Keras model, TensorFlow's verdicts on it and its SavedModel."""

    module: Any  # a tf.Module holding the model and `loss`, a tf.function with input_signature
    model: Any
    verdicts: dict[str, str]
    saved: Path


def _models() -> dict[str, Any]:
    import keras
    from keras import layers

    class Block(layers.Layer):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.dense = layers.Dense(WIDTH)
            self.norm = layers.LayerNormalization()

        def build(self, input_shape: Any) -> None:
            # No saved function reads it: its name comes from its layer's other weights.
            self.spare = self.add_weight(shape=(WIDTH,), name="spare")

        def call(self, x: Any) -> Any:
            return self.norm(self.dense(x))

    class Experts(keras.Model):
        """Subclassed, nested, auto-named layers: one expert is cut by stop_gradient."""

        def __init__(self) -> None:
            super().__init__(name="moe_model")
            self.experts = [Block(name="expert"), Block()]
            self.gate = layers.Dense(1)

        def call(self, x: Any) -> Any:
            import tensorflow as tf

            kept = self.experts[0](x)
            cut = tf.stop_gradient(self.experts[1](x))
            return self.gate(kept + cut)

    class Transformer(keras.Model):
        def __init__(self) -> None:
            super().__init__(name="transformer")
            self.mha = layers.MultiHeadAttention(num_heads=2, key_dim=2, name="mha")
            self.block = Block()

        def call(self, x: Any) -> Any:
            return self.block(self.mha(x, x))

    inputs = keras.Input((SEQUENCE, WIDTH))
    hidden = layers.MultiHeadAttention(num_heads=2, key_dim=2)(inputs, inputs)
    functional = keras.Model(inputs, layers.Dense(1)(Block()(hidden)), name="functional")
    return {"functional": functional, "experts": Experts(), "transformer": Transformer()}


@pytest.fixture(scope="module")
def subjects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Subject]:
    import tensorflow as tf

    spec = tf.TensorSpec([BATCH, SEQUENCE, WIDTH], tf.float32)
    inputs = tf.random.stateless_normal([BATCH, SEQUENCE, WIDTH], seed=(1, 2))
    found = {}
    for name, model in _models().items():
        model(inputs)
        module = tf.Module(name=f"{name}_loss")
        module.model = model
        module.loss = _loss_of(model, spec)
        loss = module.loss
        verdicts = tf_verdicts(loss, model.trainable_variables, [inputs])
        saved = tmp_path_factory.mktemp(name) / "saved"
        tf.saved_model.save(module, str(saved))
        found[name] = Subject(module, model, verdicts, saved)
    return found


def _loss_of(model: Any, spec: Any) -> Any:
    import tensorflow as tf

    @tf.function(input_signature=[spec])
    def loss(x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(tf.square(model(x)))

    return loss


@pytest.mark.parametrize("name", ["functional", "experts", "transformer"])
def test_saved_model_names_are_the_keras_paths(subjects: dict[str, Subject], name: str) -> None:
    subject = subjects[name]
    live = check_function(subject.module.loss, variables=subject.model.variables)
    saved = check(subject.saved, "loss")
    keras_paths = {variable_name(v) for v in subject.model.variables}
    assert {v.name for v in live.variables} == keras_paths
    assert {v.name for v in saved.variables} == keras_paths
    dead = dead_names(subject.verdicts)
    assert {v.name for v in saved.variables if v.dead} == dead
    assert {v.name for v in live.variables if v.dead} == dead


def test_each_name_is_the_keras_path_of_its_variable(subjects: dict[str, Subject]) -> None:
    for subject in subjects.values():
        for variable in check(subject.saved, "loss").variables:
            assert variable.path is not None
            assert variable.name == variable_name(_attribute(subject.module, variable.path))
    names = {v.name for v in check(subjects["transformer"].saved, "loss").variables}
    assert "transformer/mha/key/kernel" in names
    experts = check(subjects["experts"].saved, "loss").variables
    spare = {v.name: v.dead for v in experts if v.name.endswith("/spare")}
    assert "moe_model/expert/spare" in spare and len(spare) == 2 and all(spare.values())


def _attribute(root: Any, path: str) -> Any:
    """The object at an object graph path ("model.experts.0.dense._kernel") from `root`."""
    found = root
    for part in path.split("."):
        found = found[int(part)] if part.isdigit() else getattr(found, part)
    return found
