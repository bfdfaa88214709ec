"""Fixes that are right by construction: every rewrite a report offers is applied to a copy of
the model, and TensorFlow then gives the variable a gradient; where no rewrite is sure, the fix
has no code. Also the golden reports of the TF2 sample's quantizer fix and of a comparison
inside a tf.cond lambda.

Regenerate the golden files after an intended change with:
    python -m pytest tests/findings/advice/test_fix_rewrites.py --update-goldens
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradcheck_cli.findings.advice.fixes import offered_rewrite
from gradcheck_cli.findings.advice.transform_source import Rewrite
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.source import SourceLines
from tests import forked_python
from tests.golden import assert_matches_golden, fixed_machine, golden_terminal
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[3]
PROBE = "tests.findings.gradient_probe"
MODELS = {
    "quantizer": "sample_models/module_tf2.py",
    "seed": "sample_models/faulty_weights_tf1.py",
    "cond_round": "tests/scripts/cond_branch_cut.py",
    "cond_comparison": "tests/scripts/cond_lambda_comparison.py",
    "argmax_value": "tests/scripts/argmax_as_value.py",
    "no_rewrite": "tests/scripts/no_rewrite_cases.py",
    "dice": "tests/scripts/thresholded_dice.py",
    "fault_map_fed": "tests/scripts/fault_map_placeholder.py",
}
# The rewrites each model must be offered: (variable, the code that replaces the transform).
EXPECTED = {
    ("quantizer", "output/kernel"): "self.output_kernel + tf.stop_gradient("
    "quantize(self.output_kernel) - self.output_kernel)",
    ("seed", "hidden1/weights_i"): "weights_i + tf.stop_gradient("
    "tf.multiply((1.0/268435456.0),weights_fl) - weights_i)",
    ("cond_round", "threshold"): "(threshold + tf.stop_gradient(tf.round(threshold) - threshold))",
    ("argmax_value", "kernel"): "tf.reduce_sum(tf.nn.softmax(scores) * "
    "tf.range(tf.shape(scores)[-1], dtype=tf.float32), axis=-1)",
    # A comparison cast to a float: the soft threshold, in a tf.cond lambda too.
    ("dice", "kernel"): "tf.sigmoid((normalized - 0.5) / 0.1)",
    ("cond_comparison", "threshold"): "tf.sigmoid((x - threshold) / 0.1)",
    # A placeholder among the transform's inputs (the fault map) does not block the rewrite.
    ("fault_map_fed", "weights_i"): "weights_i + tf.stop_gradient("
    "tf.multiply(1.0 / 268435456.0, weights_fl) - weights_i)",
}


@pytest.fixture(scope="module")
def reports(repository_checks: RepositoryChecks) -> dict[str, Report]:
    return repository_checks.reports({case: (path, "loss") for case, path in MODELS.items()})


def _rewrites(reports: dict[str, Report]) -> dict[tuple[str, str], Rewrite]:
    source = SourceLines()
    found = {}
    for case, report in reports.items():
        for verdict in report.variables:
            rewrite = offered_rewrite(verdict, source) if verdict.dead else None
            if rewrite is not None:
                found[(case, verdict.name)] = rewrite
    return found


def test_the_offered_rewrites_are_the_users_whole_expressions(
    reports: dict[str, Report],
) -> None:
    rewrites = _rewrites(reports)
    assert {key: r.replacement for key, r in rewrites.items()} == EXPECTED
    for (case, name), rewrite in rewrites.items():
        assert rewrite.replacement in reports[case].fixes[name]


def test_applying_each_rewrite_gives_the_variable_a_gradient(
    reports: dict[str, Report], tmp_path: Path
) -> None:
    cases = []
    for (case, name), rewrite in sorted(_rewrites(reports).items()):
        copy = tmp_path / f"{case}.py"
        copy.write_text(_applied(Path(rewrite.location.file).read_text(), rewrite))
        cases.append([str(copy), name])
    out = tmp_path / "verdicts.json"
    forked_python.run(["-m", PROBE, json.dumps(cases), str(out)])
    verdicts = json.loads(out.read_text())
    assert dict(zip((name for _, name in cases), verdicts, strict=True)) == {
        name: "gradient" for _, name in cases
    }


def _applied(text: str, rewrite: Rewrite) -> str:
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: rewrite.location.line - 1])
    at = text.index(rewrite.original, start)
    return text[:at] + rewrite.replacement + text[at + len(rewrite.original) :]


@pytest.mark.parametrize("name", ["teacher", "selector"])
def test_no_code_where_no_rewrite_is_sure(reports: dict[str, Report], name: str) -> None:
    report = reports["no_rewrite"]
    verdict = next(v for v in report.variables if v.name == name)
    assert verdict.dead
    fix = report.fixes[name]
    assert "\n" not in fix  # a code line is an indented line of its own
    assert offered_rewrite(verdict, SourceLines()) is None
    assert "tf.stop_gradient(teacher(" not in fix


def test_a_codebook_is_told_it_needs_its_own_loss_term(reports: dict[str, Report]) -> None:
    """Inside the quantizer of a straight-through estimator no rewrite of the transform helps:
    the advice is a loss term (tests/test_intended_cuts.py trains the codebook with it)."""
    report = reports["no_rewrite"]
    verdict = next(v for v in report.variables if v.name == "codebook")
    fix = report.fixes["codebook"]
    assert offered_rewrite(verdict, SourceLines()) is None
    assert "needs a loss term of its own" in fix
    assert "soft-argmax" not in fix


@pytest.mark.parametrize(
    ("case", "golden_name"),
    [("quantizer", "quantizer_fix.txt"), ("cond_comparison", "cond_lambda_comparison.txt")],
)
def test_golden_reports(
    reports: dict[str, Report],
    case: str,
    golden_name: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixed_machine(monkeypatch)
    assert_matches_golden(golden_terminal(reports[case]), golden_name, request)


@pytest.mark.parametrize(
    ("name", "op_type", "code"),
    [
        ("threshold", "Greater", "x > threshold,"),
        ("offset", "Round", "return tf.round(steps) / 4.0"),
    ],
)
def test_an_op_in_a_cond_lambda_or_a_nested_function_is_on_its_own_line(
    reports: dict[str, Report], name: str, op_type: str, code: str
) -> None:
    verdict = next(v for v in reports["cond_comparison"].variables if v.name == name)
    (blocker,) = verdict.blockers
    assert blocker.op_type == op_type
    assert blocker.location is not None
    line = Path(blocker.location.file).read_text().splitlines()[blocker.location.line - 1]
    assert line.strip() == code
