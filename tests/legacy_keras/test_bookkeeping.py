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
}

# TensorFlow's tape over the model's own trainable variables, in a process of its own.
TAPE = """
import runpy, sys, json
import tensorflow as tf
namespace = runpy.run_path(sys.argv[1], run_name="oracle")
model = namespace["model"]
with tf.GradientTape() as tape:
    value = namespace["loss"]()
weights = model.trainable_variables
gradients = tape.gradient(value, weights)
print(json.dumps({v.name.split(":")[0]: g is None for v, g in zip(weights, gradients)}))
"""


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("legacy")
    written = {}
    for index, (case, (header, first, cut)) in enumerate(CASES.items()):
        body = MODEL.format(
            first=first, cut="hidden = tf.stop_gradient(hidden)\n    " if cut else ""
        )
        path = folder / f"model_{index}.py"
        path.write_text(HEADERS[header] + textwrap.dedent(body))
        written[case] = path
    return written


@pytest.fixture(scope="module")
def tape_dead(scripts: dict[str, Path]) -> dict[str, set[str]]:
    """Each script's dead set as TensorFlow's tape says, the oracles run side by side."""
    running = {
        case: subprocess.Popen(
            [sys.executable, "-c", TAPE, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
        )
        for case, path in scripts.items()
    }
    dead = {}
    for case, process in running.items():
        out, _ = process.communicate(timeout=300)
        verdicts = json.loads(out.strip().splitlines()[-1])
        dead[case] = {name for name, none in verdicts.items() if none}
    return dead


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
