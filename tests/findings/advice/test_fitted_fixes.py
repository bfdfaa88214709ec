"""Fixes fitted to what the cut does, each applied to a copy as its words say, and TensorFlow
then gives the variable a gradient: a count of right answers becomes a cross-entropy of the
predictions, an overwritten layer output is passed on."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.findings.report import Report
from tests.oracle import dead_in_script
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[3]
ACCURACY = "tests/scripts/accuracy_loss.py"
OVERWRITTEN = "tests/scripts/overwritten_output.py"


@pytest.fixture(scope="module")
def reports(repository_checks: RepositoryChecks) -> dict[str, Report]:
    return repository_checks.reports(
        {"accuracy": (ACCURACY, "loss"), "overwritten": (OVERWRITTEN, "loss")}
    )


def _line(path: str, text: str) -> int:
    lines = (REPO / path).read_text().splitlines()  # an absolute path stays as it is
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_a_count_of_right_answers_is_told_to_train_on_a_cross_entropy(
    reports: dict[str, Report], tmp_path: Path
) -> None:
    fix = reports["accuracy"].fixes["kernel"]
    line = _line(ACCURACY, "tf.equal(")
    assert fix.startswith(f"the loss counts right answers (the Equal at line {line}")
    assert "tf.keras.losses.binary_crossentropy(labels, predictions)" in fix
    assert "straight-through" not in fix
    text = (REPO / ACCURACY).read_text()
    advised = "return tf.reduce_mean(tf.keras.losses.binary_crossentropy(labels, predictions))"
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text.replace("return 1.0 - accuracy", advised))
    assert dead_in_script(str(REPO / ACCURACY), "loss") == {"kernel": "none"}
    assert dead_in_script(str(fixed), "loss") == {"kernel": "gradient"}


def test_an_overwritten_layer_output_is_told_at_its_lines(
    reports: dict[str, Report], tmp_path: Path
) -> None:
    report = reports["overwritten"]
    assert {v.name for v in report.dead} == {"net/dense/kernel", "net/dense/bias"}
    first = _line(OVERWRITTEN, "output = self.linear1(x)")
    again = _line(OVERWRITTEN, "output = self.linear2(x)")
    fix = report.fixes["net/dense/kernel"]
    assert fix.startswith(
        f"the output of self.linear1 at line {first} (output) is overwritten at line {again}"
    )
    text = (REPO / OVERWRITTEN).read_text()
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text.replace("output = self.linear2(x)", "output = self.linear2(output)"))
    assert _first_layer_gradients(REPO / OVERWRITTEN) == [None, None]
    assert None not in _first_layer_gradients(fixed)


def _first_layer_gradients(path: Path) -> list[Any]:
    """TensorFlow's gradients of the script's loss for its first layer's weights (run here:
    the oracle names a subclassed model's weights by their variable names, which repeat)."""
    import tensorflow as tf

    spec = importlib.util.spec_from_file_location(f"fitted_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    weights = module.model.linear1.trainable_variables
    with tf.GradientTape() as tape:
        value = module.loss()
    gradients: list[Any] = tape.gradient(value, weights)
    return gradients


COND = REPO / "tests" / "scripts" / "cond_both_branches.py"
PROBE = "tests.findings.gradient_probe"


def test_a_cut_in_both_branches_of_a_cond_is_told_at_both_lines(tmp_path: Path) -> None:
    from gradcheck_cli import check
    from tests import forked_python

    report = check(str(COND), "loss")
    (w,) = report.dead
    lines = [
        _line(str(COND), "lambda: tf.round(w * x)"),
        _line(str(COND), "lambda: tf.round(w - x)"),
    ]
    assert [b.location.line if b.location else None for b in w.blockers] == lines
    assert f"each transform (lines {lines[0]} and {lines[1]})" in report.fixes["w"]
    # Each transform wrapped in the straight-through estimator: TensorFlow trains w.
    text = COND.read_text()
    for transform in ("tf.round(w * x)", "tf.round(w - x)"):
        text = text.replace(transform, f"w + tf.stop_gradient({transform} - w)")
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text)
    out = tmp_path / "verdicts.json"
    forked_python.run(["-m", PROBE, json.dumps([[str(COND), "w"], [str(fixed), "w"]]), str(out)])
    assert json.loads(out.read_text()) == ["none", "gradient"]
