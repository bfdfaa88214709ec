"""The terminal report, compared with golden files (tests/golden.py: the same on every machine).

Regenerate after an intended change with: python -m pytest tests/reporters --update-goldens
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gradcheck_cli import check
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters import TerminalOptions
from gradcheck_cli.reporters.terminal import render_terminal
from tests import forked_python, oracle
from tests.golden import assert_matches_golden, fixed_machine, golden_terminal, redacted
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = {
    "seed_script": ("sample_models/faulty_weights_tf1.py", "loss"),
    "straight_through_fix": ("sample_models/faulty_weights_fixed.py", "loss"),
    "keras_unused_layer": ("sample_models/keras_unused_layer.py", "loss"),
    "argmax_loss": ("tests/scripts/argmax_loss.py", "loss"),
    "cond_branch_cut": ("tests/scripts/cond_branch_cut.py", "loss"),
    # 52 Dense layers under one tf.stop_gradient: one story, a collapsed table.
    "deep_stop_gradient": ("tests/scripts/deep_stop_gradient.py", "loss"),
}


@pytest.fixture(scope="module")
def reports(
    tmp_path_factory: pytest.TempPathFactory, repository_checks: RepositoryChecks
) -> dict[str, tuple[Report, Path]]:
    scripts = {name: repository_checks.start(path, loss) for name, (path, loss) in SCRIPTS.items()}
    scratch = tmp_path_factory.mktemp("golden")
    saved = scratch / "with_debug_info"
    # The sample's own `main`, forked from the oracles' TensorFlow process.
    write = "import runpy, sys; runpy.run_path(sys.argv[1])['main'](sys.argv[2])"
    forked_python.run(["-c", write, str(REPO / "sample_models/write_savedmodel.py"), str(saved)])
    bare = scratch / "without_debug_info"
    shutil.copytree(saved, bare)
    shutil.rmtree(bare / "debug")
    # A SavedModel is read without TensorFlow, in this process.
    checked = {name: future.result() for name, future in scripts.items()}
    checked["savedmodel_with_debug_info"] = check(str(saved), "loss")
    checked["savedmodel_without_debug_info"] = check(str(bare), "loss")
    return {name: (report, scratch) for name, report in checked.items()}


@pytest.mark.parametrize(
    "case", [*SCRIPTS, "savedmodel_with_debug_info", "savedmodel_without_debug_info"]
)
def test_terminal_report_matches_golden(
    case: str,
    reports: dict[str, tuple[Report, Path]],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report, scratch = reports[case]
    fixed_machine(monkeypatch)
    text = golden_terminal(redacted(report, scratch))
    assert_matches_golden(text, f"{case}.txt", request)


def test_colour_is_off_without_a_terminal(reports: dict[str, tuple[Report, Path]]) -> None:
    report, _ = reports["seed_script"]
    assert "\x1b[" not in render_terminal(report, TerminalOptions(color=False, width=80))
    assert "\x1b[" in render_terminal(report, TerminalOptions(color=True, width=80))


def test_the_grouped_model_is_judged_by_tensorflow(
    reports: dict[str, tuple[Report, Path]],
) -> None:
    """The 52-layer model's one story stands for 104 verdicts; TensorFlow agrees with each."""
    path, loss = SCRIPTS["deep_stop_gradient"]
    tensorflow = oracle.start_dead_in_script(str(REPO / path), loss).result()
    report, _ = reports["deep_stop_gradient"]
    assert {v.name for v in report.untrained} == oracle.dead_names(tensorflow)
    assert len(report.untrained) == 104
