"""Finding the loss in a script's namespace: a named attribute, a TF1 tensor name, a loss-like
candidate, or a lone function whose trace alone gives a float scalar; never training code."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import ExitCode
from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.tracing.loss_finding import SCRIPT_RUN_NAME, find_loss
from tests.cli_runs import gradcheck_json
from tests.error_documents import assert_error_document

SCRIPTS = Path(__file__).parent.parent / "scripts"

SCRIPT = """
import tensorflow as tf

w = tf.Variable(1.0, name="w")


def train_loss():
    return w * 2.0


def scaled(x):
    return w * x


class Model(tf.Module):
    @tf.function(input_signature=[])
    def loss(self):
        return w * 3.0


model = Model()
"""


@pytest.fixture(scope="module")
def namespace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("script") / "model.py"
    path.write_text(SCRIPT)
    return runpy.run_path(str(path), run_name=SCRIPT_RUN_NAME)


def test_two_loss_like_candidates_need_a_name(namespace: dict[str, Any]) -> None:
    with pytest.raises(GradcheckError, match="2 candidate losses.*'model.loss', 'train_loss'"):
        find_loss(namespace, None, Path("model.py"))


def test_a_named_attribute_path_is_the_loss(namespace: dict[str, Any]) -> None:
    name, value = find_loss(namespace, "model.loss", Path("model.py"))
    assert name == "model.loss" and value() == 3.0
    name, value = find_loss(namespace, "train_loss", Path("model.py"))
    assert name == "train_loss" and value is namespace["train_loss"]


def test_an_unknown_name_suggests_the_close_ones(namespace: dict[str, Any]) -> None:
    with pytest.raises(GradcheckError, match="no loss named 'train_los' in model.py; did you"):
        find_loss(namespace, "train_los", Path("model.py"))


def test_a_tf1_tensor_is_found_by_its_name_in_the_graph() -> None:
    import tensorflow as tf

    with tf.Graph().as_default():
        weight = tf.compat.v1.get_variable("weight", shape=[2])
        with tf.name_scope("objective"):
            total = tf.reduce_sum(weight * 2.0, name="total")
    namespace = {"total": total}
    assert find_loss(namespace, None, Path("tf1.py")) == ("total", total)
    name, tensor = find_loss(namespace, "objective/total", Path("tf1.py"))
    assert name == "objective/total" and tensor.name == "objective/total:0"
    with pytest.raises(GradcheckError, match="did you mean 'objective/total'"):
        find_loss(namespace, "objective/totl", Path("tf1.py"))


LONE_FUNCTIONS = """
import keras
import tensorflow as tf

weight = tf.Variable(2.0)
lazy = keras.Sequential([keras.layers.Dense(1)])
calls = []


def forward():
    return tf.reduce_sum(lazy(tf.ones([2, 3])))


def count():
    return tf.cast(weight, tf.int32)


def current():
    return lazy


def main():
    calls.append("main")
    return weight * 2.0


def double():
    return weight * 2.0
"""


def test_a_lone_function_is_the_loss_only_if_its_trace_alone_gives_a_float_scalar(
    tmp_path: Path,
) -> None:
    path = tmp_path / "model.py"
    path.write_text(LONE_FUNCTIONS)
    script = runpy.run_path(str(path), run_name=SCRIPT_RUN_NAME)
    for name, why in (
        ("forward", "its trace creates variables"),
        ("count", "does not return a float scalar"),
        ("current", "cannot be traced alone"),
        ("main", "named like training or setup code"),
    ):
        with pytest.raises(GradcheckError, match=f"{name}: {why}.*`gradcheck run model.py`"):
            find_loss({name: script[name]}, None, Path("model.py"))
    assert script["calls"] == []
    name, concrete = find_loss({"double": script["double"]}, None, Path("model.py"))
    assert name == "double" and type(concrete).__name__ == "ConcreteFunction"


def test_training_code_is_never_taken_for_the_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    training, inside, unnamed = (
        SCRIPTS / "bad" / "training_only.py",
        SCRIPTS / "bad" / "model_inside_loss.py",
        SCRIPTS / "unnamed_loss.py",
    )
    marker = tmp_path / "main_ran"
    monkeypatch.setenv("GRADCHECK_TEST_MARKER", str(marker))
    runs = [
        gradcheck_json(*args)
        for args in [
            (str(training),),
            (str(training), "--loss", "compute_loss"),
            (str(inside), "--loss", "loss"),
            (str(unnamed),),
        ]
    ]
    assert not marker.exists()
    guessed, with_arguments, model_inside, found = runs
    for run, script, expected in (
        (guessed, training, "main: named like training or setup code"),
        (with_arguments, training, "gradcheck cannot make up (logits, labels)"),
        (model_inside, inside, "its variables inside the loss on every call"),
    ):
        assert run.returncode == ExitCode.ERROR, run.stderr
        assert_error_document(run.stdout, run.stderr, str(script))
        assert expected in run.stderr and "`gradcheck run " in run.stderr, run.stderr
        assert "Traceback" not in run.stderr
    assert "compute_loss: takes arguments (logits, labels)" in guessed.stderr
    # The script as every message names a path: relative to the working directory inside it.
    assert f"`gradcheck run {display_path(training)}`" in guessed.stderr
    assert found.returncode == ExitCode.DEAD_VARIABLES, found.stderr
    report = json.loads(found.stdout)
    assert report["source"]["loss"] == "total"
    assert {v["name"]: v["status"] for v in report["variables"]} == {
        "weight": "ok",
        "unused": "unused",
    }
