"""Models from the libraries built on Keras: TF-MOT's quantization-aware training in run mode
(its discarded annotated clones are no GC207 noise), and a Keras 3 model with dict inputs that
only `fit` built (keras-rs rankers), each judged by TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gradcheck_cli.cli import command, run_command
from tests import forked_python
from tests.cli_runs import invoke
from tests.fitted_models import checked_after_fit

QAT = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
import tensorflow_model_optimization as tfmot

base = tf.keras.Sequential(
    [tf.keras.Input((4,)), tf.keras.layers.Dense(3, activation="relu"), tf.keras.layers.Dense(1)]
)
model = tfmot.quantization.keras.quantize_model(base)
model.compile(optimizer="adam", loss="mse")
x, y = tf.random.normal([8, 4]), tf.random.normal([8, 1])


def loss():
    return tf.reduce_mean(tf.square(model(x, training=True) - y))


if __name__ == "__main__":
    model.fit(x, y, epochs=1, verbose=0)
"""

RANKER = """
import keras
import numpy as np


class Ranker(keras.Model):
    def __init__(self):
        super().__init__()
        self.user = keras.layers.Dense(4, name="user")
        self.item = keras.layers.Dense(4, name="item")
        self.score = keras.layers.Dense(1, name="score")

    def call(self, inputs):
        item = keras.ops.stop_gradient(self.item(inputs["item"]))
        return self.score(keras.ops.concatenate([self.user(inputs["user"]), item], axis=-1))


model = Ranker()
model.compile(optimizer="adam", loss="mse")
data = {"user": np.ones((8, 3), "float32"), "item": np.ones((8, 5), "float32")}
model.fit(data, np.ones((8, 1), "float32"), epochs=1, verbose=0)
"""


def _oracle(script: Path, out: Path) -> dict:
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], None, timeout=300)
    return json.loads(out.read_text())


# TensorFlow's answer on the QAT script: which of base's and model's weights get a gradient
# from its loss (`base` is held by the script; the quantized model is a clone of it).
QAT_PROBE = """
import json, os, runpy, sys
import tensorflow as tf
space = runpy.run_path(sys.argv[1], run_name="probe")
verdicts = {}
for model in ("base", "model"):
    weights = space[model].trainable_variables
    with tf.GradientTape() as tape:
        loss = space["loss"]()
    verdicts[model] = [g is not None for g in tape.gradient(loss, weights)]
open(sys.argv[2], "w").write(json.dumps(verdicts))
"""


def test_quantization_aware_training_reports_the_base_model_it_was_cloned_from(
    tmp_path: Path,
) -> None:
    script = tmp_path / "qat.py"
    script.write_text(QAT)
    probe = tmp_path / "probe.json"
    forked_python.run(["-c", QAT_PROBE, str(script), str(probe)], None, timeout=300)
    tensorflow = json.loads(probe.read_text())
    # TensorFlow: the quantized model trains, base (a copy's source) gets no gradient.
    assert tensorflow == {"base": [False] * 4, "model": [True] * 4}
    code, stdout, stderr = invoke(run_command, [str(script), "-f", "json"])
    assert code == 0, stderr
    report = json.loads(stdout)
    (request,) = _oracle(script, tmp_path / "oracle.json")["requests"]
    statuses = {v["name"]: v["status"] for v in report["variables"]}
    trained = {name for name, status in statuses.items() if status == "ok"}
    # The trained clone's weights share their paths with `base`'s, created first: both are
    # told apart by creation, as TensorFlow's run tells them apart.
    assert trained == {source["name"] for source in request["sources"]}
    assert request["none"] == []
    # base is given to no request and holds the trained model's values: told as a copy (GC214).
    (never,) = [f for f in report["findings"] if f["code"] == "GC214"]
    assert never["message"].startswith("4 trainable variables hold the same values"), never
    # The annotated clone quantize_model made and dropped is no candidate; the record says why.
    (left_out,) = [f for f in report["findings"] if f["code"] == "GC009"]
    assert "quantize_annotate/kernel" in left_out["message"], left_out
    assert "held by no object" in left_out["message"], left_out
    assert "quantize_annotate" not in json.dumps(report["variables"]) + never["message"]
    # The plain form, on the script's loss and on the model's own objective: base's four
    # weights are unused, the quantized model's four train, as TensorFlow says.
    for loss in ("loss", "model"):
        code, stdout, stderr = invoke(command, [str(script), "--loss", loss, "-f", "json"])
        assert code == 1, stdout + stderr
        variables = [v for v in json.loads(stdout)["variables"] if v["trainable"]]
        assert sorted(v["status"] for v in variables) == ["ok"] * 4 + ["unused"] * 4, loss
        assert not [v for v in variables if "quantize_annotate" in v["name"]], loss


def test_a_model_built_by_fit_on_a_dict_is_traced_from_that_batch(tmp_path: Path) -> None:
    script = tmp_path / "ranker.py"
    script.write_text(RANKER)
    # In the script's process after its fit at import (a plain check stops that fit).
    dead = set(checked_after_fit(script, tmp_path / "checked.json")["dead"])
    (request,) = _oracle(script, tmp_path / "oracle.json")["requests"]  # fit's own step
    assert dead == set(request["none"]) == {"ranker/item/kernel", "ranker/item/bias"}


CATEGORICAL = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions
logits = tf.Variable(tf.zeros([4]), name="logits")
values = tf.constant([1.0, 2.0, 3.0, 4.0])


def loss():
{body}
"""

DRAWN = "    return tf.gather(values, tfd.Categorical(logits=logits).sample())\n"
# The fix as gradcheck words it, on this loss: a relaxed one-hot weighting the candidates.
RELAXED = (
    "    soft = tfd.RelaxedOneHotCategorical(0.5, logits=logits).sample()\n"
    "    return tf.linalg.matvec(values[:, None], soft, transpose_a=True)[0]\n"
)


def test_a_categorical_sample_is_the_cut_and_its_relaxed_twin_trains(tmp_path: Path) -> None:
    from tests.oracle import dead_in_script, dead_names

    drawn, relaxed = tmp_path / "drawn.py", tmp_path / "relaxed.py"
    drawn.write_text(CATEGORICAL.format(body=DRAWN))
    relaxed.write_text(CATEGORICAL.format(body=RELAXED))
    code, stdout, stderr = invoke(command, [str(drawn), "--loss", "loss", "--no-cache"])
    assert code == 1, stderr
    assert "Multinomial" in stdout and "the Categorical sample at line 13" in stdout
    assert "tfd.RelaxedOneHotCategorical(temperature, logits=logits)" in stdout
    assert dead_names(dead_in_script(str(drawn), "loss")) == {"logits"}
    assert dead_names(dead_in_script(str(relaxed), "loss")) == set()
    code, stdout, stderr = invoke(command, [str(relaxed), "--loss", "loss", "--no-cache"])
    assert code == 0, stdout + stderr


HUB = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import sys
import tensorflow as tf
import tensorflow_hub as hub


class Encoder(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.ones([4, 3]), name="w")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def __call__(self, x):
        return tf.matmul(x, self.w)


ENCODER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "encoder")
if not os.path.exists(ENCODER):
    tf.saved_model.save(Encoder(), ENCODER)
model = tf.keras.Sequential(
    [tf.keras.Input((4,)), hub.KerasLayer(ENCODER), tf.keras.layers.Dense(1, name="head")]
)
model.compile(optimizer="adam", loss="mse")
x, y = tf.random.normal([8, 4]), tf.random.normal([8, 1])


def loss():
    return tf.reduce_mean(tf.square(model(x) - y))


if __name__ == "__main__":
    import json

    model.save(sys.argv[1])
    with tf.GradientTape() as tape:  # TensorFlow's verdict on the model's own weights
        value = loss()
    weights = model.trainable_variables
    grads = tape.gradient(value, weights)
    print(json.dumps({v.name.split(":")[0]: g is None for v, g in zip(weights, grads)}))
"""


def test_a_tf_hub_layer_under_legacy_keras_in_a_script_and_in_its_h5(tmp_path: Path) -> None:
    # The script asks for Keras 2 at its top: gradcheck's worker imports nothing of Keras 3
    # before that line counts (a tf_keras Sequential would refuse Keras 3's Dense), and the .h5
    # loads with TF-Hub's KerasLayer named.
    script = tmp_path / "hub_model.py"
    script.write_text(HUB)
    saved = tmp_path / "hub_model.h5"
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"}
    run = [sys.executable, str(script), str(saved)]
    done = subprocess.run(run, env=env, check=True, capture_output=True, text=True, timeout=300)
    tensorflow = json.loads(done.stdout.strip().splitlines()[-1])
    for args in ([str(script), "--loss", "loss"], [str(saved)]):
        code, stdout, stderr = invoke(command, [*args, "-f", "json", "--no-cache"])
        assert code == 0, stdout + stderr
        statuses = {v["name"]: v["status"] for v in json.loads(stdout)["variables"]}
        assert statuses["head/kernel"] == statuses["head/bias"] == "ok", (args, statuses)
        dead = {name for name, status in statuses.items() if status in ("blocked", "unused")}
        assert dead == {name for name, none in tensorflow.items() if none}, (args, statuses)
        assert {"head/kernel", "head/bias"} <= set(tensorflow)
