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


STOPS = REPO / "tests" / "scripts" / "cond_both_stops.py"


def test_a_stop_gradient_in_both_branches_of_a_cond_is_removed_at_both_lines(
    tmp_path: Path,
) -> None:
    from gradcheck_cli import check

    report = check(str(STOPS), "loss")
    (w,) = report.dead
    lines = [
        _line(str(STOPS), "lambda: tf.stop_gradient(w * x)"),
        _line(str(STOPS), "lambda: tf.stop_gradient(w - x)"),
    ]
    assert [b.location.line if b.location else None for b in w.blockers] == lines
    assert report.fixes["w"].startswith(
        f"remove the tf.stop_gradient at lines {lines[0]} and {lines[1]} "
    )
    # Both removed, as the words say: TensorFlow trains w whichever branch runs.
    text = STOPS.read_text()
    both = tmp_path / "both.py"
    both.write_text(
        text.replace("tf.stop_gradient(w * x)", "w * x").replace("tf.stop_gradient(w - x)", "w - x")
    )
    assert _probe(tmp_path, [(STOPS, "w"), (both, "w")]) == ["none", "gradient"]


IMAGE = REPO / "tests" / "scripts" / "image_dtype_loss.py"


def test_a_library_s_conversion_to_integers_is_fixed_by_keeping_floats(tmp_path: Path) -> None:
    from gradcheck_cli import check

    report = check(str(IMAGE), "loss")
    (w,) = report.dead
    line = _line(str(IMAGE), "tf.image.convert_image_dtype(")
    fix = report.fixes["w"]
    assert fix.startswith(
        f"the cast to uint8 is made inside TensorFlow's convert_image_dtype, called at line {line}"
    )
    assert "straight-through" not in fix
    # Kept floating point, as the words say: TensorFlow trains w.
    fixed = tmp_path / "fixed.py"
    fixed.write_text(IMAGE.read_text().replace("tf.uint8, saturate=True", "tf.float32"))
    assert _probe(tmp_path, [(IMAGE, "w"), (fixed, "w")]) == ["none", "gradient"]


BUILT = REPO / "tests" / "scripts" / "computed_in_build.py"
COPIED = REPO / "tests" / "scripts" / "assigned_copy.py"


def _probe(tmp_path: Path, cases: list[tuple[Path, str]]) -> list[str]:
    from tests import forked_python

    out = tmp_path / "verdicts.json"
    forked_python.run(["-m", PROBE, json.dumps([[str(p), n] for p, n in cases]), str(out)])
    verdicts: list[str] = json.loads(out.read_text())
    return verdicts


def test_a_value_computed_in_build_is_told_as_such_not_as_a_layer_never_called(
    tmp_path: Path,
) -> None:
    from gradcheck_cli import check
    from gradcheck_cli.reporters.json_reporter import render_json

    report = check(str(BUILT), "loss")
    (w,) = report.dead
    assert w.unreached is not None and w.unreached.value == "called_not_read"
    fix = report.fixes[w.name]
    assert fix.startswith("read layer.w in the layer's call(): compute what is derived from it")
    (finding,) = [f for f in report.findings if f.code == "GC108"]
    assert "its layer is called in the loss, but the call never reads it" in finding.message
    assert "never called" not in finding.message
    assert json.loads(render_json(report))["variables"][0]["fix"] == fix
    # The fix as its words say: the kernel computed in call(); TensorFlow then trains w.
    text = BUILT.read_text().replace("        self.kernel = self.w * 2.0\n", "")
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text.replace("tf.matmul(x, self.kernel)", "tf.matmul(x, self.w * 2.0)"))
    assert dead_in_script(str(BUILT), "loss") == {"scaled/w": "none"}
    assert dead_in_script(str(fixed), "loss") == {"scaled/w": "gradient"}


def test_a_value_only_assigned_is_told_at_the_assignment_with_the_copy_named(
    tmp_path: Path,
) -> None:
    from gradcheck_cli import check

    report = check(str(COPIED), "loss")
    (weight,) = report.dead
    line = _line(str(COPIED), "shadow.assign(weight * 2.0)")
    assert weight.unreached is not None and weight.unreached.value == "assigned_away"
    assert weight.assigned_at is not None and weight.assigned_at.line == line
    fix = report.fixes["weight"]
    assert fix.startswith(f"use the value assigned at line {line} in the loss itself: shadow")
    (finding,) = [f for f in report.findings if f.code == "GC108"]
    assert f"only assigned to shadow at assigned_copy.py:{line}" in finding.message
    text = COPIED.read_text()
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text.replace("tf.reduce_sum(shadow * x)", "tf.reduce_sum(weight * 2.0 * x)"))
    assert _probe(tmp_path, [(COPIED, "weight"), (fixed, "weight")]) == ["none", "gradient"]


SAMPLED = REPO / "tests" / "scripts" / "sampled_choice.py"


def test_a_categorical_sample_is_told_to_relax_the_draw_or_score_it(tmp_path: Path) -> None:
    from gradcheck_cli import check

    report = check(str(SAMPLED), "loss")
    assert {v.name for v in report.dead} == {"policy/kernel", "policy/bias"}
    line = _line(str(SAMPLED), "tf.random.categorical(")
    fix = report.fixes["policy/kernel"]
    assert fix.startswith(f"the tf.random.categorical at line {line} draws an index")
    assert "straight-through" not in fix
    # Both forms the fix names, applied to a copy: TensorFlow then trains the policy.
    text = SAMPLED.read_text()
    draw = "    index = tf.random.categorical(logits, 1)[:, 0]\n"
    relaxed = text.replace(
        draw,
        "    soft = tf.nn.softmax((logits - tf.math.log(-tf.math.log(tf.random.uniform("
        "tf.shape(logits))))) / 0.5)\n",
    ).replace("tf.gather(table, index)", "tf.matmul(soft, table)")
    scored = text.replace(
        "    return tf.reduce_mean(chosen**2)",
        "    reward = tf.reduce_mean(chosen**2, axis=-1)\n"
        "    return tf.reduce_mean(tf.stop_gradient(reward) * "
        "-tf.nn.sparse_softmax_cross_entropy_with_logits(labels=index, logits=logits))",
    )
    assert dead_in_script(str(SAMPLED), "loss") == {"policy/kernel": "none", "policy/bias": "none"}
    for name, fixed_text in (("relaxed", relaxed), ("scored", scored)):
        fixed = tmp_path / f"{name}.py"
        fixed.write_text(fixed_text)
        assert dead_in_script(str(fixed), "loss") == {
            "policy/kernel": "gradient",
            "policy/bias": "gradient",
        }, name
