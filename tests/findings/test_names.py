"""Every name form a report prints picks its variables, for --why and for allow-dead."""

from __future__ import annotations

import pytest

from gradcheck_cli.analysis.verdicts import Status
from gradcheck_cli.findings.names import sharing_last_part, variables_matching, variables_named
from gradcheck_cli.findings.policy import apply_policy
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.run import missing_variable
from tests.reporters.factories import verdict

OUTPUT_LINE = SourceLocation("model.py", 37)
PROJ = SourceLocation("model.py", 12)
HIDDEN_LINE = SourceLocation("model.py", 5)


def _report() -> Report:
    variables = (
        verdict("hidden1/weights_i", Status.BLOCKED),
        verdict("hidden1/biases", Status.OK),
        verdict("softmax_linear/biases", Status.OK),
        verdict("output/kernel", Status.BLOCKED, location=OUTPUT_LINE),
        # A functional model bound to `model`: the layers are reached through model.layers.
        verdict("dense/kernel", Status.OK, path="model.layers[1].kernel", location=HIDDEN_LINE),
        verdict("dense/bias", Status.OK, path="model.layers[1].bias", location=HIDDEN_LINE),
        # A subclassed model bound to `encoder`, its proj layer unused.
        verdict("encoder/proj/kernel", Status.UNUSED, path="encoder.proj.kernel", location=PROJ),
        verdict("encoder/proj/bias", Status.UNUSED, path="encoder.proj.bias", location=PROJ),
        verdict("sequential/dense_2/kernel", Status.BLOCKED),
        verdict("sequential/dense_2/bias", Status.BLOCKED),
    )
    # What the creation lines bind each variable (or its layer) to, as the pipeline reads them
    # (`created_name`): `self.output_kernel = tf.Variable(`, `self.proj = layers.Dense(32)`;
    # `hidden = keras.layers.Dense(4)(inputs)` binds the layer's output, which names nothing.
    names = {
        "output/kernel": "self.output_kernel",
        "encoder/proj/kernel": "self.proj",
        "encoder/proj/bias": "self.proj",
    }
    return Report(SourceInfo("model.py", "script", "loss"), variables, python_names=names)


def _named(name: str) -> list[str]:
    report = _report()
    return [v.name for v in variables_named(report.variables, name, report.python_name)]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("hidden1/weights_i", ["hidden1/weights_i"]),
        ("weights_i", ["hidden1/weights_i"]),
        ("encoder.proj.kernel", ["encoder/proj/kernel"]),
        ("encoder.proj", ["encoder/proj/kernel", "encoder/proj/bias"]),
        ("proj", ["encoder/proj/kernel", "encoder/proj/bias"]),
        ("self.proj", ["encoder/proj/kernel", "encoder/proj/bias"]),
        ("model.layers[1].kernel", ["dense/kernel"]),
        ("model.layers[1]", ["dense/kernel", "dense/bias"]),
        ("model.dense.kernel", ["dense/kernel"]),
        ("model.dense", ["dense/kernel", "dense/bias"]),
        ("dense", ["dense/kernel", "dense/bias"]),
        ("hidden", []),  # the name of the layer's output
        ("sequential.dense_2.bias", ["sequential/dense_2/bias"]),
        ("dense_2", ["sequential/dense_2/kernel", "sequential/dense_2/bias"]),
        ("sequential/dense_2", ["sequential/dense_2/kernel", "sequential/dense_2/bias"]),
        ("self.output_kernel", ["output/kernel"]),
        ("output_kernel", ["output/kernel"]),
        ("hidden1", ["hidden1/weights_i", "hidden1/biases"]),
        ("weights", []),
    ],
)
def test_each_printed_form_names_its_variables(name: str, expected: list[str]) -> None:
    assert _named(name) == expected


def test_a_last_part_that_several_variables_share_names_none_and_the_error_lists_them() -> None:
    report = _report()
    assert _named("biases") == []
    assert _named("kernel") == []
    assert [v.name for v in sharing_last_part(report.variables, "biases")] == [
        "hidden1/biases",
        "softmax_linear/biases",
    ]
    message = missing_variable([report], "biases")
    assert message is not None
    assert "'biases'" in message and "hidden1/biases, softmax_linear/biases" in message
    assert missing_variable([report], "weights_i") is None
    assert missing_variable([report], "self.output_kernel") is None
    unknown = missing_variable([report], "nothing_like_it")
    assert unknown is not None and "no variable named 'nothing_like_it'" in unknown


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("weights_i", ["hidden1/weights_i"]),
        ("model.layers[1].kernel", ["dense/kernel"]),
        ("encoder.proj", ["encoder/proj/kernel", "encoder/proj/bias"]),
        ("encoder.*", ["encoder/proj/kernel", "encoder/proj/bias"]),
        ("proj", ["encoder/proj/kernel", "encoder/proj/bias"]),
        ("dense_*", ["sequential/dense_2/kernel", "sequential/dense_2/bias"]),
        ("*/biases", ["hidden1/biases", "softmax_linear/biases"]),
        ("biases", []),
        ("self.output_kernel", ["output/kernel"]),
    ],
)
def test_allow_dead_patterns_glob_over_the_same_forms(pattern: str, expected: list[str]) -> None:
    report = _report()
    assert [v.name for v in variables_matching(report.variables, pattern, report.python_name)] == (
        expected
    )


def test_allow_dead_accepts_a_layer_and_a_unique_last_part() -> None:
    report = apply_policy(_report(), allow_dead=["encoder.proj", "weights_i"])
    assert set(report.allowed) == {"encoder/proj/kernel", "encoder/proj/bias", "hidden1/weights_i"}
