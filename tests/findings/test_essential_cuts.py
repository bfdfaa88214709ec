"""The cut a report blames is the one to change: on the variable's paths to the loss that cross
the fewest cuts. A cut on a side path is told apart, and TensorFlow shows that removing it alone
leaves the variable dead (the advised soft threshold is applied in test_fix_rewrites.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters import Format, TerminalOptions, render
from tests.oracle import dead_in_script, dead_names
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[2]
DICE = "tests/scripts/thresholded_dice.py"
MOMENTS = "mean, variance = tf.nn.moments(features, axes=[0], keepdims=True)"
# tf.nn.moments without its stop_gradient.
BY_HAND = (
    "mean = tf.reduce_mean(features, axis=0, keepdims=True)\n"
    "    variance = tf.reduce_mean(tf.square(features - mean), axis=0, keepdims=True)"
)


@pytest.fixture(scope="module")
def dice(repository_checks: RepositoryChecks) -> Report:
    return repository_checks.start(DICE, "loss").result()


def _line(text: str) -> int:
    lines = (REPO / DICE).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_the_comparison_is_the_cut_and_the_moments_stop_gradient_a_side_cut(dice: Report) -> None:
    (kernel,) = dice.dead
    assert [(b.op_type, b.location.line if b.location else None) for b in kernel.blockers] == [
        ("Greater", _line("normalized > 0.5"))
    ]
    assert [(b.reason, b.location.line if b.location else None) for b in kernel.side_cuts] == [
        (Reason.STOP_GRADIENT, _line(MOMENTS))
    ]
    errors = [f for f in dice.findings if f.variable == kernel.name]
    assert [f.op for f in errors] == [kernel.blockers[0].op]
    fix = dice.fixes[kernel.name]
    assert "stop_gradient" not in fix
    assert "soft threshold" in fix
    assert kernel.name not in dice.still_cut


def test_the_side_cut_is_shown_only_on_request(
    dice: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    plain = render(dice, Format.TERMINAL, TerminalOptions(width=None))
    verbose = render(dice, Format.TERMINAL, TerminalOptions(width=None, verbose=True))
    assert "StopGradient" not in plain
    assert "side cut" in verbose and "StopGradient" in verbose
    # The side cut is tf.nn.moments's own, and says so.
    assert f"{DICE}:{_line(MOMENTS)}, inside TensorFlow's moments" in verbose
    document = render(dice, Format.JSON)
    assert '"side_cuts"' in document


def test_tensorflow_says_removing_the_side_cut_alone_trains_nothing(tmp_path: Path) -> None:
    text = (REPO / DICE).read_text()
    assert MOMENTS in text
    without = tmp_path / "without_stop_gradient.py"
    without.write_text(text.replace(MOMENTS, BY_HAND))
    assert dead_names(dead_in_script(str(REPO / DICE), "loss")) == {"kernel"}
    assert dead_names(dead_in_script(str(without), "loss")) == {"kernel"}


LIBRARY_STOP = Path(__file__).resolve().parents[1] / "scripts" / "library_stop_gradient.py"


def test_a_stop_gradient_inside_a_library_is_told_as_the_librarys(tmp_path: Path) -> None:
    from gradcheck_cli import check

    report = check(str(LIBRARY_STOP), "loss")
    (temperature,) = report.dead
    (cut,) = temperature.blockers
    assert cut.location is not None
    assert cut.location.inside == "TensorFlow's softmax_cross_entropy_with_logits"
    fix = report.fixes["temperature"]
    assert fix.startswith(
        "the tf.stop_gradient that cuts temperature is inside TensorFlow's "
        f"softmax_cross_entropy_with_logits, called at line {cut.location.line}"
    )
    assert "remove the tf.stop_gradient" not in fix
    # The API the fix names, applied to a copy: TensorFlow trains the temperature.
    fixed = tmp_path / "fixed.py"
    fixed.write_text(
        LIBRARY_STOP.read_text().replace(
            "tf.compat.v1.nn.softmax_cross_entropy_with_logits",
            "tf.nn.softmax_cross_entropy_with_logits",
        )
    )
    assert dead_in_script(str(LIBRARY_STOP), "loss")["temperature"] == "none"
    assert dead_in_script(str(fixed), "loss") == {"student": "gradient", "temperature": "gradient"}
