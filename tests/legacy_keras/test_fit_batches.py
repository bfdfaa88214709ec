"""Models whose only known input is the batch `fit` trained them on: a Keras 2 retrieval model
(TensorFlow Recommenders' shape: a dict of ids, its own train_step calling compute_loss, a task
layer that needs autograph to trace) and a Keras 3 model that overrides compute_loss and compiles no
loss. Both fit at import: a plain check stops them at fit's first gradient step, before any
weight changes, and names `gradcheck run`, which sees fit itself; `gradcheck_cli.check(model)` after
the fit, in the script's process, traces each from fit's batch. TensorFlow's gradients in that fit
are the judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradcheck_cli.cli import command, run_command
from tests import forked_python
from tests.cli_runs import invoke
from tests.fitted_models import checked_after_fit

RETRIEVAL = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np
import tensorflow as tf


class Scores(tf.keras.layers.Layer):
    # A task layer as TFRS writes them: Keras 2 runs its call through autograph.

    def call(self, users, items):
        if len(tf.shape(users)) == 3:  # Python control flow on a tensor
            users = tf.reduce_mean(users, axis=1)
        scores = tf.matmul(users, items, transpose_b=True)
        labels = tf.eye(tf.shape(scores)[0])
        return tf.reduce_mean(tf.keras.losses.categorical_crossentropy(labels, scores, True))


class Retrieval(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.users = tf.keras.layers.Embedding(10, 4, name="users")
        self.items = tf.keras.layers.Embedding(20, 4, name="items")
        self.spare = tf.keras.layers.Dense(3, name="spare")
        self.spare.build((None, 4))  # built outside any call: Keras 2 names its weights `kernel`
        self.task = Scores()

    def compute_loss(self, features, training=False):
        return self.task(self.users(features["user"]), self.items(features["item"]))

    def train_step(self, features):
        with tf.GradientTape() as tape:
            loss = self.compute_loss(features, training=True)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(
            (g, v) for g, v in zip(gradients, self.trainable_variables) if g is not None
        )
        return {"loss": loss}


model = Retrieval()
model.compile(optimizer=tf.keras.optimizers.Adagrad(0.1))
data = {"user": np.arange(8) % 10, "item": np.arange(8) % 20}
model.fit(tf.data.Dataset.from_tensor_slices(data).batch(4), epochs=1, verbose=0)
"""

SELF_SCORED = """
import keras
import numpy as np
import tensorflow as tf


class SelfScored(keras.Model):
    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(10, 4, name="embed")
        self.head = keras.layers.Dense(1, name="head")
        self.probe = keras.layers.Dense(1, name="probe")

    def call(self, inputs):
        return self.head(self.embed(inputs["ids"]))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        watched = tf.stop_gradient(self.probe(x["side"]))
        return tf.reduce_mean(self(x)) + tf.reduce_mean(watched)


model = SelfScored()
model.compile(optimizer="adam")  # no loss: compute_loss is the objective
data = {"ids": np.arange(8) % 10, "side": np.ones((8, 3), "float32")}
model.fit(tf.data.Dataset.from_tensor_slices(data).batch(4), epochs=1, verbose=0)
"""

SCRIPTS = {"retrieval": RETRIEVAL, "self_scored": SELF_SCORED}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """Each script, with TensorFlow's record of the one request its fit makes."""
    folder = tmp_path_factory.mktemp("fit_batches")
    written = {}
    for name, text in SCRIPTS.items():
        script, out = folder / f"{name}.py", folder / f"{name}.json"
        script.write_text(text)
        forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], None, timeout=300)
        (request,) = json.loads(out.read_text())["requests"]
        written[name] = (script, request)
    return written


def _dead(stdout: str) -> set[str]:
    """Blocked or unused, whether or not gradcheck tells it as looking intended."""
    variables = json.loads(stdout)["variables"]
    return {v["name"] for v in variables if v["status"] in ("blocked", "unused")}


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_model_s_objective_is_traced_from_the_batch_fit_saw(
    name: str, scripts: dict[str, tuple[Path, dict]], tmp_path: Path
) -> None:
    script, request = scripts[name]
    checked = checked_after_fit(script, tmp_path / "checked.json")
    assert len(checked["variables"]) == len(request["variables"]), checked
    assert len(checked["dead"]) == len(request["none"]) == 2
    if name == "self_scored":  # Keras 3 names every weight by its path, as TensorFlow does
        assert set(checked["dead"]) == set(request["none"])


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_plain_check_stops_the_fit_at_import_before_any_weight_changes(
    name: str, scripts: dict[str, tuple[Path, dict]]
) -> None:
    script, _ = scripts[name]
    code, stdout, stderr = invoke(command, [str(script), "--loss", "model"])
    assert code == 2 and stdout == "", stdout + stderr
    assert "trains when imported" in stderr and "before any weight changed" in stderr, stderr
    assert f"`gradcheck run {script}`" in stderr and "Traceback" not in stderr


def test_fit_s_request_names_an_unscoped_keras_2_weight_by_its_layer(
    scripts: dict[str, tuple[Path, dict]],
) -> None:
    script, request = scripts["retrieval"]
    # TensorFlow names the spare layer's weights `kernel` and `bias`, which name no layer.
    assert sorted(request["none"]) == ["bias", "kernel"]
    code, stdout, stderr = invoke(run_command, [str(script), "-f", "json"])
    assert code == 1, stdout + stderr
    assert _dead(stdout) == {"spare/kernel", "spare/bias"}
    assert "GC207" not in stdout, stdout


def test_a_loss_computed_in_compute_loss_is_judged_as_fit_judges_it(
    scripts: dict[str, tuple[Path, dict]],
) -> None:
    script, request = scripts["self_scored"]
    code, stdout, stderr = invoke(run_command, [str(script), "-f", "json"])
    assert code in (0, 1), stderr
    assert _dead(stdout) == set(request["none"]) == {"probe/kernel", "probe/bias"}
