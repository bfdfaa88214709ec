"""Keras 2 (tf_keras): what it says about gradcheck's own calls is left out (loading a file
without the optimizer's variables, which gradcheck never builds) or told as gradcheck's line
(computing a compiled loss it warns about), never labelled with the script's name."""

from __future__ import annotations

import json
from pathlib import Path

from gradcheck_cli.cli import command
from tests import forked_python
from tests.cli_runs import invoke

SAVE = """
import sys
import tf_keras as keras
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.save(sys.argv[1])
"""

SCRIPT = """
import warnings
import tf_keras as keras

warnings.warn("the script's own warning", UserWarning)

inputs = keras.Input((4,))
hidden = keras.layers.Dense(8, name="hidden")(inputs)
probabilities = keras.layers.Dense(3, activation="softmax", name="head")(hidden)
model = keras.Model(inputs, probabilities)
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
"""


def test_a_keras_2_file_loads_without_keras_s_word_on_the_optimizer_gradcheck_never_builds(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "regressor.keras"
    forked_python.run(["-c", SAVE, str(saved)])
    code, out, err = invoke(command, [str(saved), "-f", "json", "--no-cache"])
    assert code in (0, 1), err
    assert json.loads(out)["variables"]
    assert "Skipping variable loading" not in err and "optimizer" not in err, err


def test_keras_2_s_warning_on_the_compiled_loss_is_gradcheck_s_line(tmp_path: Path) -> None:
    script = tmp_path / "classifier.py"
    script.write_text(SCRIPT)
    arguments = [str(script), "--loss", "model", "-f", "json", "--no-cache"]
    code, out, err = invoke(command, arguments)
    assert code in (0, 1), err
    json.loads(out)
    lines = err.splitlines()
    gradcheck_s = [line for line in lines if line.startswith("gradcheck: Keras warned when")]
    assert len(gradcheck_s) == 1 and "received `from_logits=True`" in gradcheck_s[0], err
    scripts = [line for line in lines if line.startswith("classifier.py:")]
    assert not [line for line in scripts if "from_logits" in line], err
    assert any(line.endswith("UserWarning: the script's own warning") for line in scripts), err
