"""A warning Keras raises on gradcheck's own call (computing a model's compiled loss while
gradcheck traces its objective) is gradcheck's line, never labelled with the script's name; a
warning the script's own code raises stays the script's, also when gradcheck's hooks watch the
call (`gradcheck run`: the script's own `fit` computes the loss)."""

from __future__ import annotations

import json
from pathlib import Path

from gradcheck_cli.cli import command, run_command
from tests.cli_runs import invoke

# A softmax output compiled with `from_logits=True`: Keras warns when the loss is computed,
# which this script never does at import; gradcheck does, when it traces the objective.
MODEL = """
import warnings
import keras
import numpy as np

warnings.warn("the script's own warning", UserWarning)

inputs = keras.Input((4,))
hidden = keras.layers.Dense(8, name="hidden")(inputs)
probabilities = keras.layers.Dense(3, activation="softmax", name="head")(hidden)
model = keras.Model(inputs, probabilities)
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
"""
FIT = """
if __name__ == "__main__":
    model.fit(np.zeros((8, 4), "float32"), np.zeros((8,), "int32"), epochs=1, verbose=0)
"""
KERAS_S = (
    'gradcheck: Keras warned when gradcheck called it: UserWarning: "`sparse_categorical_'
    "crossentropy` received `from_logits=True`, but the `output` argument was produced by a "
    "Softmax activation and thus does not represent logits. Was this intended?"
)


def _lines(err: str, script: str) -> tuple[list[str], list[str]]:
    """stderr's lines labelled with the script's name, and gradcheck's."""
    lines = err.splitlines()
    return (
        [line for line in lines if line.startswith(f"{script}:")],
        [line for line in lines if line.startswith("gradcheck: ")],
    )


def test_keras_s_warning_on_gradcheck_s_call_is_gradcheck_s_and_the_script_s_stays_its(
    tmp_path: Path,
) -> None:
    script = tmp_path / "classifier.py"
    script.write_text(MODEL + FIT)
    arguments = [str(script), "--loss", "model", "-f", "json", "--no-cache"]
    code, out, err = invoke(command, arguments)
    assert code in (0, 1), err
    json.loads(out)  # stdout: the report alone
    scripts, gradcheck_s = _lines(err, script.name)
    assert KERAS_S in gradcheck_s, err
    assert not [line for line in scripts if "from_logits" in line], err
    assert any(line.endswith("UserWarning: the script's own warning") for line in scripts), err


def test_the_same_warning_from_the_script_s_own_fit_stays_the_script_s(tmp_path: Path) -> None:
    script = tmp_path / "classifier.py"
    script.write_text(MODEL + FIT)
    code, out, err = invoke(run_command, [str(script), "-f", "json"])  # fit, caught at its step
    assert code in (0, 1), err
    json.loads(out)
    scripts, gradcheck_s = _lines(err, script.name)
    assert not [line for line in gradcheck_s if "from_logits" in line], err
    assert any("received `from_logits=True`" in line for line in scripts), err


def test_quiet_keeps_the_script_s_warning_out_and_gradcheck_s_in(tmp_path: Path) -> None:
    script = tmp_path / "classifier.py"
    script.write_text(MODEL)
    arguments = [str(script), "--loss", "model", "-f", "json", "--no-cache", "-q"]
    code, out, err = invoke(command, arguments)
    assert code in (0, 1), err
    scripts, gradcheck_s = _lines(err, script.name)
    assert scripts == [] and KERAS_S in gradcheck_s, err
