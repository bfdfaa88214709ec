"""Keras 2 (`tf_keras`, and `tf.keras` under TF_USE_LEGACY_KERAS) and the libraries built on it:
the variables a library makes for its own bookkeeping (a model's step counters, TFP's seed
state) are never candidates; the model's own weights are judged as TensorFlow's tape judges them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradcheck_cli.cli import command
from tests.cli_runs import invoke

HEADERS = {
    "tf_keras": "import tensorflow as tf\nimport tf_keras as keras\n",
    "legacy tf.keras": (
        'import os\nos.environ["TF_USE_LEGACY_KERAS"] = "1"\nimport tensorflow as tf\n'
        "keras = tf.keras\n"
    ),
    "tfp": (
        'import os\nos.environ["TF_USE_LEGACY_KERAS"] = "1"\nimport tensorflow as tf\n'
        "import tensorflow_probability as tfp\nkeras = tf.keras\n"
    ),
}
# DenseVariational's posterior and prior: a trainable mean-field normal, and a prior whose
# mean the KL term (in model.losses) trains.
HEADERS["tfp variational"] = HEADERS["tfp"] + textwrap.dedent(
    """
    tfd = tfp.distributions


    def posterior(kernel_size, bias_size=0, dtype=None):
        n = kernel_size + bias_size
        return keras.Sequential([
            tfp.layers.VariableLayer(2 * n, dtype=dtype),
            tfp.layers.DistributionLambda(lambda t: tfd.Independent(
                tfd.Normal(loc=t[..., :n], scale=1e-5 + tf.nn.softplus(t[..., n:])), 1)),
        ])


    def prior(kernel_size, bias_size=0, dtype=None):
        n = kernel_size + bias_size
        return keras.Sequential([
            tfp.layers.VariableLayer(n, dtype=dtype),
            tfp.layers.DistributionLambda(lambda t: tfd.Independent(tfd.Normal(t, 1.0), 1)),
        ])
    """
)

MODEL = """
x = tf.random.normal([8, 4])
y = tf.random.normal([8, 1])
model = keras.Sequential([keras.Input((4,)), {first}, keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")


def loss():
    hidden = model.layers[0](x)
    {cut}return tf.reduce_mean(tf.square(model.layers[1](hidden) - y)) + sum(model.losses)
"""

# Every case: (header, first layer, whether the first layer's output is cut).
CASES = {
    "tf_keras": ("tf_keras", 'keras.layers.Dense(3, activation="relu")', False),
    "tf_keras, cut": ("tf_keras", 'keras.layers.Dense(3, activation="relu")', True),
    "legacy tf.keras, cut": ("legacy tf.keras", "keras.layers.Dense(3)", True),
    "tfp flipout": ("tfp", "tfp.layers.DenseFlipout(3)", False),
    "tfp reparameterization, cut": ("tfp", "tfp.layers.DenseReparameterization(3)", True),
    "tfp variational": (
        "tfp variational",
        "tfp.layers.DenseVariational(3, posterior, prior, kl_weight=1 / 8)",
        False,
    ),
}

# TensorFlow's tape over each script's model's own trainable variables: one process for all.
TAPE = """
import json, runpy, sys
import tensorflow as tf
import tf_keras
dead = []
for script in sys.argv[1:]:
    tf_keras.backend.clear_session()  # each script's layers named as in a process of its own
    namespace = runpy.run_path(script, run_name="oracle")
    model = namespace["model"]
    with tf.GradientTape() as tape:
        value = namespace["loss"]()
    weights = model.trainable_variables
    gradients = tape.gradient(value, weights)
    dead.append(sorted(v.name.split(":")[0] for v, g in zip(weights, gradients) if g is None))
print(json.dumps(dead))
"""


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("legacy")
    written = {}
    for index, (case, (header, first, cut)) in enumerate(CASES.items()):
        stop = "hidden = tf.stop_gradient(hidden)\n    " if cut else ""
        path = folder / f"model_{index}.py"
        path.write_text(HEADERS[header] + textwrap.dedent(MODEL.format(first=first, cut=stop)))
        written[case] = path
    return written


@pytest.fixture(scope="module")
def tape_dead(scripts: dict[str, Path]) -> dict[str, set[str]]:
    """Each script's dead set as TensorFlow's tape says."""
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_USE_LEGACY_KERAS": "1", "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-c", TAPE, *map(str, scripts.values())]
    out = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300, check=True)
    verdicts = json.loads(out.stdout.strip().splitlines()[-1])
    return {case: set(dead) for case, dead in zip(scripts, verdicts, strict=True)}


@pytest.mark.parametrize("case", CASES)
def test_only_the_model_s_own_weights_are_judged_as_tensorflow_judges_them(
    case: str, scripts: dict[str, Path], tape_dead: dict[str, set[str]]
) -> None:
    code, stdout, stderr = invoke(
        command, [scripts[case], "--loss", "loss", "-f", "json", "--no-cache"]
    )
    assert code in (0, 1), stderr
    variables = json.loads(stdout)["variables"]
    trainable = {v["name"] for v in variables if v["trainable"]}
    dead = {v["name"] for v in variables if v["status"] in ("blocked", "unused")}
    # No step counter, optimizer slot or seed: the trainable variables are the model's own.
    assert all(v["dtype"].startswith("float") for v in variables if v["trainable"]), variables
    assert dead == tape_dead[case]
    assert CASES[case][2] == bool(dead)  # the cut is the only way to a dead variable
    assert len(trainable) >= 4


def test_a_keras_2_weight_is_placed_at_its_layer_s_line(tmp_path: Path) -> None:
    script = tmp_path / "placed.py"
    script.write_text(
        "import tensorflow as tf\nimport tf_keras as keras\n\nx = tf.ones([8, 4])\n"
        'encoder = keras.layers.Dense(3, name="encoder")\n'
        "model = keras.Sequential([keras.Input((4,)), encoder, keras.layers.Dense(1)])\n\n\n"
        "def loss():\n    return tf.reduce_sum(model.layers[1](tf.stop_gradient(encoder(x))))\n"
    )
    code, stdout, stderr = invoke(command, [script, "--loss", "loss", "--no-cache", "-v"])
    assert code in (0, 1), stderr
    assert f"created at {script}:5" in stdout, stdout  # the layer's line, not the model's


def test_a_model_a_helper_module_builds_is_owned_and_told_unused(tmp_path: Path) -> None:
    # The script never names Keras: its helper does. The model it leaves unused is still the
    # user's (bound in the script), and TensorFlow agrees that it gets no gradient.
    from tests.oracle import dead_in_script, dead_names

    (tmp_path / "helper.py").write_text(
        "import keras\n\n\ndef build():\n"
        "    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n"
    )
    script = tmp_path / "main.py"
    script.write_text(
        "import tensorflow as tf\nfrom helper import build\n\nmodel = build()\nspare = build()\n"
        "x = tf.ones([4, 3])\n\n\ndef loss():\n    return tf.reduce_sum(model(x))\n"
    )
    code, stdout, stderr = invoke(command, [script, "--loss", "loss", "-f", "json", "--no-cache"])
    assert code == 1, stderr
    variables = json.loads(stdout)["variables"]
    unused = {v["name"] for v in variables if v["status"] == "unused"}
    assert len(unused) == 2 and all(name.startswith("sequential_1/") for name in unused)
    assert len(dead_names(dead_in_script(str(script), "loss"))) == 2
