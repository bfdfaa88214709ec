"""A term added to the loss that trains nothing is one warning at its line (GC211), with a fix
fitted to its op; TensorFlow says the term alone gives no variable a gradient, and the advised
soft index does. A comparison used as a mask, one-hot pseudo-labels and a cross-entropy on
`tf.zeros_like` labels (its `logits * labels` is zero, value and gradient) are no dead term."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.findings.finding import Severity
from gradcheck_cli.findings.report import Report
from tests.oracle import dead_in_script, dead_names
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "tests/scripts/dead_penalty.py"
LOSSES = ("loss", "soft_penalty_loss", "masked_loss", "pseudo_label_loss", "zero_labels_loss")


@pytest.fixture(scope="module")
def reports(repository_checks: RepositoryChecks) -> dict[str, Report]:
    found = repository_checks.reports({name: (SCRIPT, name) for name in LOSSES})
    # Every loss trains both variables, TensorFlow says, as the reports say.
    for name, report in found.items():
        assert dead_names(dead_in_script(str(REPO / SCRIPT), name)) == set(), name
        assert not report.dead, name
    return found


def _line(text: str) -> int:
    lines = (REPO / SCRIPT).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_an_argmax_penalty_is_one_warning_at_its_line(reports: dict[str, Report]) -> None:
    report = reports["loss"]
    assert not report.dead
    (term,) = [f for f in report.findings if f.code == "GC211"]
    assert term.severity is Severity.WARNING
    assert term.location is not None
    assert term.location.line == _line("penalty = tf.reduce_mean(tf.cast(tf.argmax(")
    assert term.hint is not None and "soft index" in term.hint
    # Told once, not as a cut on some paths of each variable behind it.
    assert not [f for f in report.findings if f.code == "GC204" and f.op == term.op]


def test_tensorflow_says_the_term_trains_nothing_and_the_soft_index_trains(
    reports: dict[str, Report],
) -> None:
    alone = dead_in_script(str(REPO / SCRIPT), "penalty_loss")
    assert alone == {"kernel": "none", "bias": "none"}
    soft_alone = dead_in_script(str(REPO / SCRIPT), "soft_penalty_alone")
    assert soft_alone == {"kernel": "gradient", "bias": "gradient"}
    soft = reports["soft_penalty_loss"]
    assert not [f for f in soft.findings if f.code == "GC211"]
    assert not soft.dead


@pytest.mark.parametrize("name", ["masked_loss", "pseudo_label_loss", "zero_labels_loss"])
def test_a_mask_pseudo_labels_or_zero_labels_are_no_dead_term(
    reports: dict[str, Report], name: str
) -> None:
    report = reports[name]
    assert not report.dead
    assert not [f for f in report.findings if f.code == "GC211"]


def test_tensorflow_says_the_zero_labelled_cross_entropy_trains() -> None:
    # The term whose `logits * zeros_like(logits)` gradcheck sees as zero trains both variables
    # on its own: the product is a piece of the term, zero in value as in gradient.
    alone = dead_in_script(str(REPO / SCRIPT), "zero_labels_alone")
    assert alone == {"kernel": "gradient", "bias": "gradient"}
