"""Finding the loss in a script's namespace: a named attribute, a TF1 tensor name, or the single
loss-like candidate."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.loaders.loss_finding import SCRIPT_RUN_NAME, find_loss

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
