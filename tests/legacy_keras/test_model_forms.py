"""A Keras 2 model in every form gradcheck takes: `--loss model` on a script's model, and the
`.h5`, `.keras` and SavedModel files it saves (a SavedModel is checked on its compiled
objective), in both import styles (`tf_keras`, and `tf.keras` under TF_USE_LEGACY_KERAS).
TensorFlow's tape over the compiled objective is the judge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck_cli.cli import command
from tests.cli_runs import invoke

STYLES = {
    "tf_keras": "import tensorflow as tf\nimport tf_keras as keras\n",
    "legacy tf.keras": (
        'import os\nos.environ["TF_USE_LEGACY_KERAS"] = "1"\nimport tensorflow as tf\n'
        "keras = tf.keras\n"
    ),
}

# `model` cuts its first layer off the loss (a frozen copy of its output); the files hold a
# model that trains all its weights.
SCRIPT = """
inputs = keras.Input((4,))
hidden = keras.layers.Dense(3, name="encoder")(inputs)
cut = keras.layers.Lambda(tf.stop_gradient, name="cut")(hidden)
model = keras.Model(inputs, keras.layers.Dense(1, name="head")(cut))
model.compile(optimizer="adam", loss="mse")

if __name__ == "__main__":
    import sys
    clean = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    clean.compile(optimizer="sgd", loss="mse")
    for suffix in (".h5", ".keras", "_savedmodel"):
        clean.save(sys.argv[1] + suffix)  # beside the script, under its own name
"""

# Each script run as __main__ (it saves its files), then TensorFlow's tape over each model's own
# trainable variables on its compiled objective: the script's model, and each file loaded by
# the same Keras. One process for every style.
TAPE = """
import json, runpy, sys
import tensorflow as tf
dead = {}
for script in sys.argv[1:]:
    stem = script[: -len(".py")]
    sys.argv = [script, stem]
    runpy.run_path(script, run_name="__main__")
    namespace = runpy.run_path(script, run_name="oracle")
    models = {script: namespace["model"]}
    for suffix in (".h5", ".keras", "_savedmodel"):
        models[stem + suffix] = namespace["keras"].models.load_model(stem + suffix)
    for name, model in models.items():
        x, y = tf.random.normal([8, 4]), tf.random.normal([8, 1])
        with tf.GradientTape() as tape:
            value = model.compiled_loss(y, model(x, training=True))
        weights = model.trainable_variables
        grads = tape.gradient(value, weights)
        dead[name] = sorted(v.name.split(":")[0] for v, g in zip(weights, grads) if g is None)
print(json.dumps(dead))
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], dict[str, list]]:
    """Per style, the script (its files saved beside it); TensorFlow's dead sets by path."""
    folder = tmp_path_factory.mktemp("forms")
    scripts = {}
    for index, (style, header) in enumerate(STYLES.items()):
        scripts[style] = folder / f"style_{index}.py"
        scripts[style].write_text(header + SCRIPT)
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_USE_LEGACY_KERAS": "1", "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-c", TAPE, *map(str, scripts.values())]
    out = subprocess.run(run, check=True, env=env, capture_output=True, text=True, timeout=300)
    return scripts, json.loads(out.stdout.strip().splitlines()[-1])


def _checked(args: list[str]) -> tuple[int, dict[str, str], str]:
    code, stdout, stderr = invoke(command, [*args, "-f", "json", "--no-cache"])
    assert code in (0, 1), stderr
    assert "Traceback" not in stderr and "gradcheck: warning" not in stderr, stderr
    statuses = {v["name"]: v["status"] for v in json.loads(stdout)["variables"]}
    return code, statuses, stderr


@pytest.mark.parametrize("style", STYLES)
def test_the_model_s_own_objective_is_judged_as_tensorflow_judges_it(
    style: str, written: tuple[dict[str, Path], dict[str, list]]
) -> None:
    scripts, tape = written
    code, statuses, _ = _checked([str(scripts[style]), "--loss", "model"])
    dead = sorted(name for name, status in statuses.items() if status in ("blocked", "unused"))
    assert dead == tape[str(scripts[style])] == ["encoder/bias", "encoder/kernel"]
    assert set(statuses) == {"encoder/kernel", "encoder/bias", "head/kernel", "head/bias"}


@pytest.mark.parametrize("suffix", [".h5", ".keras", "_savedmodel"])
@pytest.mark.parametrize("style", STYLES)
def test_the_files_keras_2_saved_load_and_check_clean(
    style: str, suffix: str, written: tuple[dict[str, Path], dict[str, list]]
) -> None:
    scripts, tape = written
    saved = str(scripts[style])[: -len(".py")] + suffix
    code, statuses, _ = _checked([saved])
    assert tape[saved] == [] and code == 0
    assert len(statuses) == 4 and set(statuses.values()) == {"ok"}, statuses
