"""Shape-only uses and structural zero gradients in real TensorFlow graphs, judged by TensorFlow:
in this process, through the CLI on the script, and as a SavedModel."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli import check, check_function
from gradcheck_cli.cli import command
from gradcheck_cli.findings.report import Report
from tests.cli_runs import Ran, invoke
from tests.tf_oracle_inprocess import dead_names, tf_verdicts, variable_name

SCRIPT = Path(__file__).parents[1] / "scripts" / "shape_and_zero_uses.py"

# Each dead variable: its reason, and the text of the line whose op cuts it.
EXPECTED = {
    "zeros_like_only": ("index_or_shape_input", "tf.zeros_like(self.zeros_like_only)"),
    "ones_like_only": ("index_or_shape_input", "tf.ones_like(self.ones_like_only)"),
    "shape_only": ("index_or_shape_input", "tf.shape(self.shape_only)"),
    "size_only": ("index_or_shape_input", "tf.size(self.size_only)"),
    "rank_only": ("index_or_shape_input", "tf.rank(self.rank_only)"),
    "times_zero": ("zero_gradient", "0.0 * self.times_zero"),
    "times_zeros_like": ("zero_gradient", "tf.zeros_like(self.x) * self.times_zeros_like"),
    "times_copied_zero": (
        "zero_gradient",
        "tf.identity(tf.identity(0.0)) * self.times_copied_zero",
    ),
    "where_never_taken": ("zero_gradient", "self.where_never_taken))"),
    "stacked_away": ("zero_gradient", "self.stacked_away])[0]"),
    "concatenated_away": ("zero_gradient", "self.concatenated_away], 0)[:2]"),
    "gathered_away": ("zero_gradient", "rows = tf.stack("),
}
# A SavedModel keeps no trace of zeros_like/ones_like of a variable (TensorFlow does not even
# read it), so there they are merely unused.
NOT_IN_A_SAVED_GRAPH = {"zeros_like_only", "ones_like_only"}


def _line(text: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    (number,) = [i for i, line in enumerate(lines, 1) if text in line]
    return number


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("shape_and_zero_uses", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _assert_expected(variables: list[dict[str, Any]], *, saved: bool = False) -> None:
    by_name = {v["name"]: v for v in variables}
    assert by_name["live"]["status"] == "ok"
    for name, (reason, text) in EXPECTED.items():
        verdict = by_name[name]
        if saved and name in NOT_IN_A_SAVED_GRAPH:
            assert verdict["status"] == "unused", name
            continue
        assert verdict["status"] == "blocked", name
        assert [b["reason"] for b in verdict["blockers"]] == [reason], name
        if not saved:
            (blocker,) = verdict["blockers"]
            assert blocker["location"]["line"] == _line(text), name


def _as_json(report: Report) -> list[dict[str, Any]]:
    return [
        {
            "name": v.name,
            "status": v.status.value,
            "blockers": [
                {
                    "reason": b.reason.value,
                    "location": {"line": b.location.line} if b.location else None,
                }
                for b in v.blockers
            ],
        }
        for v in report.variables
    ]


@pytest.fixture(scope="module")
def cli_run() -> Ran:
    """`gradcheck SCRIPT --verify --format json`, in this process (its worker forks warm)."""
    return invoke(command, [SCRIPT, "--verify", "--format", "json"])


def test_in_process_verdicts_name_the_shape_use_or_the_zero(tmp_path: Path) -> None:
    import tensorflow as tf

    module = _module()
    model = module.model
    # gradcheck traces first: a trace TensorFlow's own call made first would be reused.
    report = check_function(model.loss, variables=model.trainable_variables, verify=True)
    assert report.verification is not None and not report.verification.disagreements
    verdicts = tf_verdicts(model.loss, model.trainable_variables)
    assert dead_names(verdicts) == set(EXPECTED)
    assert {v.name for v in report.variables if v.dead} == set(EXPECTED)
    _assert_expected(_as_json(report))

    fresh = module.ShapeAndZeroUses()
    directory = tmp_path / "saved"
    tf.saved_model.save(fresh, str(directory))
    saved = check(directory, loss="loss")
    names = {variable_name(v) for v in fresh.trainable_variables}
    assert {v.name for v in saved.variables} == names
    assert {v.name for v in saved.variables if v.dead} == set(EXPECTED)
    _assert_expected(_as_json(saved), saved=True)


def test_the_cli_on_the_script_agrees_with_tensorflow(
    cli_run: Ran,
) -> None:
    assert cli_run.returncode == 1, cli_run.stderr
    report = json.loads(cli_run.stdout)
    codes = {f["code"] for f in report["findings"]}
    assert "GC003" in codes and "GC002" not in codes
    _assert_expected(report["variables"])
