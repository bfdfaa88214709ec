"""Models of the libraries, in the forms gradcheck takes, each judged by TensorFlow: a TF-MOT
quantization-aware CNN with batch norm as a SavedModel, a Sonnet conv net whose batch norm the
step leaves out (run mode), a Keras 2 subclassed model on a dict of inputs with an unused pooler
(a script's model and its SavedModel), a `.keras` whose compiled loss is a custom function, and
TFP's DenseVariational with a trainable prior (no GC206), beside a pooler that only an L2
`add_loss` reaches (GC206). One subprocess asks TensorFlow about all of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import command, run_command
from tests.cli_runs import invoke

QAT_CNN = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
import tensorflow_model_optimization as tfmot

layers = tf.keras.layers
base = tf.keras.Sequential([
    tf.keras.Input((8, 8, 1)),
    layers.Conv2D(4, 3),
    layers.BatchNormalization(),
    layers.ReLU(),
    layers.Flatten(),
    layers.Dense(2),
])
model = tfmot.quantization.keras.quantize_model(base)


class Trainer(tf.Module):
    def __init__(self):
        super().__init__()
        self.model = model

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1]), tf.TensorSpec([None, 2])])
    def loss(self, x, y):
        return tf.reduce_mean(tf.square(self.model(x, training=True) - y))


trainer = Trainer()
"""

SONNET = """
import sonnet as snt
import tensorflow as tf


class ConvNet(snt.Module):
    def __init__(self):
        super().__init__()
        self.conv = snt.Conv2D(8, 3)
        self.norm = snt.BatchNorm(create_scale=True, create_offset=True)
        self.logits = snt.Linear(4)

    def __call__(self, x, is_training):
        return self.logits(snt.flatten(tf.nn.relu(self.norm(self.conv(x), is_training))))


model = ConvNet()
optimizer = snt.optimizers.Adam(1e-3)
x, y = tf.random.normal([4, 8, 8, 1]), tf.constant([0, 1, 2, 3])


def loss():
    logits = model(x, is_training=True)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))


@tf.function
def step():
    with tf.GradientTape() as tape:
        value = loss()
    # The batch norm's scale and offset are left out of the list (they exist only now, made
    # by the first call inside this trace).
    params = model.conv.trainable_variables + model.logits.trainable_variables
    optimizer.apply(tape.gradient(value, params), params)


step()
"""

SUBCLASSED = """
import tensorflow as tf
import tf_keras as keras


class Encoder(keras.Model):
    def __init__(self):
        super().__init__()
        self.embedding = keras.layers.Embedding(10, 4, name="embedding")
        self.sequence = keras.layers.Dense(4, name="sequence")
        self.pooler = keras.layers.Dense(4, name="pooler")
        self.head = keras.layers.Dense(1, name="head")

    def call(self, inputs, training=False):
        mask = tf.cast(inputs["attention_mask"], tf.float32)[..., None]
        states = self.sequence(self.embedding(inputs["input_ids"]) * mask)
        pooled = self.pooler(states[:, 0])  # a pooled output no loss reads
        return self.head(states)[..., 0]


model = Encoder()
model({"input_ids": tf.zeros([2, 5], tf.int32), "attention_mask": tf.ones([2, 5], tf.int32)})
model.compile(optimizer="adam", loss="mse")
"""

CUSTOM_LOSS = """
import tensorflow as tf
import tf_keras as keras


def weighted_mse(y_true, y_pred):
    return tf.reduce_mean(2.0 * tf.square(y_true - y_pred))


inputs = keras.Input((4,))
hidden = keras.layers.Dense(3, name="encoder")(inputs)
model = keras.Model(inputs, keras.layers.Dense(1, name="head")(hidden))
model.compile(optimizer="adam", loss=weighted_mse)
"""

VARIATIONAL = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions


def posterior(kernel_size, bias_size=0, dtype=None):
    n = kernel_size + bias_size
    c = np.log(np.expm1(1.0))
    return tf.keras.Sequential([
        tfp.layers.VariableLayer(2 * n, dtype=dtype),
        tfp.layers.DistributionLambda(lambda t: tfd.Independent(
            tfd.Normal(loc=t[..., :n], scale=1e-5 + tf.nn.softplus(c + t[..., n:])),
            reinterpreted_batch_ndims=1)),
    ])


def trainable_prior(kernel_size, bias_size=0, dtype=None):
    n = kernel_size + bias_size
    return tf.keras.Sequential([
        tfp.layers.VariableLayer(n, dtype=dtype),
        tfp.layers.DistributionLambda(lambda t: tfd.Independent(
            tfd.Normal(loc=t, scale=1), reinterpreted_batch_ndims=1)),
    ])


model = tf.keras.Sequential([
    tf.keras.Input((1,)),
    tfp.layers.DenseVariational(1, posterior, trainable_prior, kl_weight=1 / 32),
    tfp.layers.DistributionLambda(lambda t: tfd.Normal(loc=t, scale=1)),
])
model.compile(optimizer="adam", loss=lambda y, distribution: -distribution.log_prob(y))
"""

ADD_LOSS_POOLER = """
import tensorflow as tf
import tf_keras as keras

inputs = keras.Input((4,))
hidden = keras.layers.Dense(8, name="trunk")(inputs)
pooled = keras.layers.Dense(4, name="pooler")(hidden)
model = keras.Model(inputs, [keras.layers.Dense(1, name="head")(hidden), pooled])
kernels = [w for w in model.trainable_weights if "kernel" in w.name]
model.add_loss(lambda: 1e-4 * tf.add_n([tf.nn.l2_loss(w) for w in kernels]))
model.compile(optimizer="adam", loss=["mse", None])
"""

SCRIPTS = {
    "qat_cnn.py": QAT_CNN,
    "sonnet_convnet.py": SONNET,
    "subclassed.py": SUBCLASSED,
    "custom_loss.py": CUSTOM_LOSS,
    "variational.py": VARIATIONAL,
    "add_loss_pooler.py": ADD_LOSS_POOLER,
}

# TensorFlow's answers, one process: each script run, its forms saved beside it, and tapes.
TRUTH = r"""
import json, runpy, sys
import numpy as np
import tensorflow as tf

folder = sys.argv[1]
truth = {}


def name(variable):
    return variable.name.split(":")[0]


def dead(tape, value, variables):
    grads = tape.gradient(value, variables)
    return sorted(name(v) for v, g in zip(variables, grads) if g is None or not np.any(g))


def run(script):
    return runpy.run_path(f"{folder}/{script}", run_name="truth")


# The QAT CNN, saved with its loss: the tape over the loss, on the live model.
ns = run("qat_cnn.py")
tf.saved_model.save(ns["trainer"], f"{folder}/qat_cnn")
x, y = tf.random.normal([4, 8, 8, 1]), tf.random.normal([4, 2])
with tf.GradientTape() as tape:
    value = ns["trainer"].loss(x, y)
weights = ns["model"].trainable_variables
truth["qat_cnn"] = {"dead": dead(tape, value, weights), "all": sorted(map(name, weights))}

# Sonnet: which variables the step lists, and which the loss gives a gradient.
ns = run("sonnet_convnet.py")
model = ns["model"]
with tf.GradientTape() as tape:
    value = ns["loss"]()
weights = model.trainable_variables
listed = model.conv.trainable_variables + model.logits.trainable_variables
truth["sonnet"] = {
    "unlisted": sorted(name(v) for v in weights if all(v is not w for w in listed)),
    "dead": dead(tape, value, weights),
}

# The subclassed model on a dict, as the script holds it and from its SavedModel.
ns = run("subclassed.py")
ns["model"].save(f"{folder}/subclassed_savedmodel")
import tf_keras
inputs = {"input_ids": tf.constant([[1, 2, 3, 4, 5]] * 2),
          "attention_mask": tf.ones([2, 5], tf.int32)}
loaded = tf_keras.models.load_model(f"{folder}/subclassed_savedmodel")
for key, model in (("subclassed", ns["model"]), ("subclassed_savedmodel", loaded)):
    with tf.GradientTape() as tape:
        value = model.compiled_loss(tf.random.normal([2, 5]), model(inputs, training=True))
    truth[key] = {"dead": dead(tape, value, model.trainable_variables),
                  "all": sorted(map(name, model.trainable_variables))}

# The .keras whose loss is a custom function, under the loss the command line names (mse).
ns = run("custom_loss.py")
ns["model"].save(f"{folder}/custom_loss.keras")
model = ns["model"]
with tf.GradientTape() as tape:
    prediction = model(tf.random.normal([8, 4]), training=True)
    value = tf.reduce_mean(tf_keras.losses.mse(tf.random.normal([8, 1]), prediction))
truth["custom_loss"] = {"dead": dead(tape, value, model.trainable_variables),
                        "all": sorted(map(name, model.trainable_variables))}


def penalty_facts(model, x, y, loss):
    # Per variable: its gradient from the whole objective, from the data loss alone, and
    # whether the whole objective's gradient for it changes with a variable the data trains.
    weights = model.trainable_variables
    with tf.GradientTape(persistent=True) as outer:
        with tf.GradientTape(persistent=True) as tape:
            prediction = model(x, training=True)
            data = loss(y, prediction)
            full = data + tf.add_n(model.losses)
        full_grads = tape.gradient(full, weights)
        data_grads = tape.gradient(data, weights)
    trained = [w for w, g in zip(weights, data_grads) if g is not None and np.any(g)]
    facts = {}
    for weight, full_grad, data_grad in zip(weights, full_grads, data_grads):
        second = [outer.gradient(full_grad, t) for t in trained] if full_grad is not None else []
        facts[name(weight)] = {
            "full": full_grad is not None and bool(np.any(full_grad)),
            "data": data_grad is not None and bool(np.any(data_grad)),
            "tied": any(s is not None and bool(np.any(s)) for s in second),
        }
    return facts


ns = run("variational.py")
truth["variational"] = penalty_facts(
    ns["model"], tf.random.normal([8, 1]), tf.random.normal([8, 1]),
    lambda y, distribution: tf.reduce_mean(-distribution.log_prob(y)),
)
ns = run("add_loss_pooler.py")
truth["add_loss_pooler"] = penalty_facts(
    ns["model"], tf.random.normal([8, 4]), tf.random.normal([8, 1]),
    lambda y, outputs: tf.reduce_mean(tf.square(y - outputs[0])),
)
print(json.dumps(truth))
"""


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("library_models")
    for script, text in SCRIPTS.items():
        (folder / script).write_text(text)
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-c", TRUTH, str(folder)]
    done = subprocess.run(run, env=env, check=True, capture_output=True, text=True, timeout=600)
    return folder, json.loads(done.stdout.strip().splitlines()[-1])


def _report(args: list[str], *, run: bool = False) -> tuple[int, dict[str, Any], str]:
    code, stdout, stderr = invoke(run_command if run else command, [*args, "-f", "json"])
    assert code in (0, 1), stdout + stderr
    report = json.loads(stdout)
    return code, report[0] if isinstance(report, list) else report, stderr


def _dead(report: dict[str, Any]) -> list[str]:
    return sorted(v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused"))


def test_a_quantization_aware_cnn_s_batch_norm_trains_in_its_saved_model(
    truth: tuple[Path, dict[str, Any]],
) -> None:
    folder, tensorflow = truth
    code, report, _ = _report([str(folder / "qat_cnn"), "--loss", "loss", "--no-cache"])
    trainable = [v for v in report["variables"] if v["trainable"]]
    assert len(trainable) == len(tensorflow["qat_cnn"]["all"]) == 6
    assert tensorflow["qat_cnn"]["dead"] == [] and _dead(report) == [] and code == 0
    assert {v["status"] for v in trainable} == {"ok"}


def test_a_sonnet_batch_norm_made_inside_the_traced_step_is_told_unlisted(
    truth: tuple[Path, dict[str, Any]],
) -> None:
    folder, tensorflow = truth
    code, report, _ = _report([str(folder / "sonnet_convnet.py")], run=True)
    unlisted = tensorflow["sonnet"]["unlisted"]
    assert sorted(unlisted) == ["conv_net/batch_norm/offset", "conv_net/batch_norm/scale"]
    assert not set(unlisted) & set(tensorflow["sonnet"]["dead"])  # the loss would train them
    (told,) = [f for f in report["findings"] if f["code"] == "GC213"]
    assert all(name in told["message"] for name in unlisted), told
    assert not set(unlisted) & {v["name"] for v in report["variables"]}
    assert code == 0 and _dead(report) == []


@pytest.mark.parametrize("form", ["subclassed", "subclassed_savedmodel"])
def test_a_subclassed_model_on_a_dict_is_traced_from_its_recorded_inputs(
    truth: tuple[Path, dict[str, Any]], form: str
) -> None:
    folder, tensorflow = truth
    args = (
        [str(folder / "subclassed.py"), "--loss", "model"]
        if form == "subclassed"
        else [str(folder / form)]
    )
    code, report, _ = _report([*args, "--no-cache"])
    assert tensorflow[form]["dead"] == ["encoder/pooler/bias", "encoder/pooler/kernel"]
    assert sorted(v["name"] for v in report["variables"]) == tensorflow[form]["all"]
    assert _dead(report) == tensorflow[form]["dead"] and code == 1


def test_a_keras_file_whose_loss_is_a_custom_function_is_checked_with_the_loss_named(
    truth: tuple[Path, dict[str, Any]],
) -> None:
    folder, tensorflow = truth
    saved = str(folder / "custom_loss.keras")
    code, report, _ = _report([saved, "--loss", "mse", "--no-cache"])
    assert sorted(v["name"] for v in report["variables"]) == tensorflow["custom_loss"]["all"]
    assert _dead(report) == tensorflow["custom_loss"]["dead"] == [] and code == 0
    code, stdout, stderr = invoke(command, [saved, "--no-cache"])
    assert code == 2, stdout + stderr
    assert "'weighted_mse'" in stderr and "--loss mse" in stderr and "--import" in stderr


@pytest.mark.parametrize(
    ("script", "warned"),
    [("variational", []), ("add_loss_pooler", ["pooler/kernel"])],
)
def test_gc206_is_the_penalty_that_only_decays(
    truth: tuple[Path, dict[str, Any]], script: str, warned: list[str]
) -> None:
    folder, tensorflow = truth
    facts = tensorflow[script]
    # TensorFlow: the variables the data loss never trains but model.losses do, and of those,
    # the ones whose gradient a trained variable does not move.
    only_penalties = sorted(n for n, f in facts.items() if f["full"] and not f["data"])
    decaying = sorted(n for n in only_penalties if not facts[n]["tied"])
    assert only_penalties, facts
    assert decaying == warned
    code, report, _ = _report([str(folder / f"{script}.py"), "--loss", "model", "--no-cache"])
    assert sorted(f["variable"] for f in report["findings"] if f["code"] == "GC206") == warned
    assert {v["status"] for v in report["variables"] if v["name"] in only_penalties} == {"ok"}
