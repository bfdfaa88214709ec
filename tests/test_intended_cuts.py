"""Cuts that look intended, against TensorFlow. In `gradcheck run` the script's own gradient
requests say what it means to train: a distillation teacher and a DQN target network under one
tf.stop_gradient, and a GAN's networks each trained by the other request, are errors of the
request that lists them, with advice fitted to what they look like. In a plain check a loss has
no variable list, and a network wholly under one stop_gradient is a warning (GC209). Also a
VQ-VAE codebook behind the straight-through estimator (GC112, an error) and a stop_gradient on an
intermediate that is not intended (GC101).

One `gradcheck run` of tests/scripts/intent/intended_cuts.py (one report per gradient request),
one plain check of tests/scripts/intent/gan_losses.py, and TensorFlow's own answer for each, all
started at once. Terminal reports are compared with golden files (regenerate with
--update-goldens).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli import check, check_script_run
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters.json_reporter import as_dict
from gradcheck_cli.reporters.verdict_text import verdict_parts
from tests import forked_python
from tests.golden import assert_matches_golden, fixed_machine, golden_terminal
from tests.oracle import dead_in_script, dead_names

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts" / "intent"
RUN_SCRIPT = SCRIPTS / "intended_cuts.py"
PLAIN_SCRIPT = SCRIPTS / "gan_losses.py"

# The gradient request of each step, in the order train_step makes them, and a variable it lists.
STEPS = {
    "distill": "student/student_0/kernel",
    "dqn": "q_network/q_network_0/kernel",
    "vq": "codebook",
    "vq_fixed": "fixed_codebook",
    "d": "discriminator/discriminator_0/kernel",
    "g": "generator/generator_0/kernel",
    "partial": "early/kernel",
}
TEACHER = [f"teacher/teacher_{i}/{w}" for i in (0, 1) for w in ("kernel", "bias")]
TARGET = [f"target_network/target_network_{i}/{w}" for i in (0, 1) for w in ("kernel", "bias")]
DISCRIMINATOR = [f"discriminator/discriminator_{i}/{w}" for i in (0, 1) for w in ("kernel", "bias")]
GENERATOR = ["generator/generator_0/kernel", "generator/generator_0/bias"]

Checked = dict[str, Any]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    scratch = tmp_path_factory.mktemp("intent")
    marker = scratch / "trained.marker"
    oracle_out = scratch / "oracle.json"

    def run_oracle() -> dict[str, Any]:
        env = {**os.environ, "GRADCHECK_TEST_MARKER": str(marker)}
        argv = ["-m", "tests.run_oracle", str(oracle_out), str(RUN_SCRIPT)]
        forked_python.run(argv, env, timeout=300)
        return json.loads(oracle_out.read_text())

    os.environ["GRADCHECK_TEST_MARKER"] = str(scratch / "gradcheck.marker")
    try:
        # TensorFlow's answers fork in the background; gradcheck's two checks run one after
        # the other, so the second worker forks from the warm launcher.
        with ThreadPoolExecutor(max_workers=2) as pool:
            oracle = pool.submit(run_oracle)
            plain_oracle = pool.submit(dead_in_script, str(PLAIN_SCRIPT), "generator_loss")
            reports = dict(zip(STEPS, check_script_run(RUN_SCRIPT), strict=True))
            for step, report in reports.items():
                assert STEPS[step] in {v.name for v in report.variables}, step
            return {
                "reports": reports,
                "plain": check(str(PLAIN_SCRIPT), "generator_loss"),
                "oracle": oracle.result(),
                "plain_oracle": plain_oracle.result(),
            }
    finally:
        del os.environ["GRADCHECK_TEST_MARKER"]


def _codes(report: Report) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for item in as_dict(report)["findings"]:
        if item["variable"] is not None:
            found.setdefault(item["variable"], set()).add(item["code"])
    return found


def test_every_verdict_agrees_with_tensorflow(checked: Checked) -> None:
    requests = checked["oracle"]["requests"]
    assert checked["oracle"]["error"] is None
    assert len(requests) == len(STEPS) == len(checked["reports"])
    for report in checked["reports"].values():
        line = report.source.request.location.line
        (answer,) = [r for r in requests if r["location"]["line"] == line]
        assert [v.name for v in report.variables] == answer["variables"]
        assert {v.name for v in report.variables if v.dead} == set(answer["none"]), line
    plain = checked["plain"]
    assert {v.name for v in plain.variables if v.dead} == dead_names(checked["plain_oracle"])


def test_json_keeps_one_entry_per_variable_and_its_status(checked: Checked) -> None:
    reports = checked["reports"]
    statuses = {
        step: {v["name"]: v["status"] for v in as_dict(report)["variables"]}
        for step, report in reports.items()
    }
    for step, report in reports.items():
        names = [v["name"] for v in as_dict(report)["variables"]]
        assert len(names) == len(set(names)) == len(report.variables), step
    assert {statuses["distill"][name] for name in TEACHER} == {"blocked"}
    assert {statuses["dqn"][name] for name in TARGET} == {"blocked"}
    assert statuses["vq"]["codebook"] == "blocked"
    assert statuses["vq_fixed"]["fixed_codebook"] == "ok"
    assert {statuses["d"][name] for name in GENERATOR} == {"blocked"}
    assert {statuses["g"][name] for name in DISCRIMINATOR} == {"unused"}
    assert {statuses["partial"][name] for name in ("middle/kernel", "middle/bias")} == {"blocked"}


def test_a_whole_network_under_one_stop_gradient_that_the_request_lists_is_an_error(
    checked: Checked,
) -> None:
    cases = (("distill", TEACHER, "teacher"), ("dqn", TARGET, "target_network"))
    for step, members, owner in cases:
        report = checked["reports"][step]
        codes = _codes(report)
        assert all(codes[name] == {"GC101"} for name in members), codes
        assert not report.intended
        assert {v.name for v in report.dead} == set(members)
        (fix,) = {report.fixes[name] for name in members}
        assert "leave its variables out of this request" in fix
        assert f"`{owner}.trainable = False`" in fix and "remove the tf.stop_gradient" in fix
        # The one fix is every finding's hint, so every format gives it.
        assert {f.hint for f in report.findings if f.variable in members} == {fix}
        variables = {v["name"]: v for v in as_dict(report)["variables"]}
        assert variables[members[0]]["fix"] == fix and "intended" not in variables[members[0]]
        assert (
            verdict_parts(report)[0] == f"4 of {len(report.variables)} trainable variables are dead"
        )


def test_networks_another_request_trains_are_errors_of_the_request_that_lists_them(
    checked: Checked,
) -> None:
    reports = checked["reports"]
    lines = {step: reports[step].source.request.location.line for step in ("d", "g")}
    cases = (("d", GENERATOR, "g", "GC101"), ("g", DISCRIMINATOR, "d", "GC108"))
    for step, members, trainer, code in cases:
        report = reports[step]
        assert all(_codes(report)[name] == {code} for name in members)
        assert not report.intended and {v.name for v in report.dead} == set(members)
        fix = report.fixes[members[0]]
        assert fix.startswith(f"the gradient request at line {lines[trainer]} trains")
        assert "leave them out of this request's variables" in fix
        assert {f.hint for f in report.findings if f.variable in members} == {fix}


def test_a_vq_vae_codebook_is_told_to_need_its_own_loss_term(checked: Checked) -> None:
    report = checked["reports"]["vq"]
    assert _codes(report)["codebook"] == {"GC112"}
    assert "codebook" not in report.intended and report.dead
    fix = report.fixes["codebook"]
    assert "passes gradient to z only" in fix and "soft-argmax" not in fix
    # The advised codebook loss is what vq_fixed_step adds, and TensorFlow trains that codebook.
    advised = fix.splitlines()[-1].strip()
    assert advised == "codebook_loss = tf.reduce_mean((tf.stop_gradient(z) - nearest) ** 2)"
    assert advised in RUN_SCRIPT.read_text()
    fixed = checked["reports"]["vq_fixed"]
    assert not fixed.dead and "fixed_codebook" in {v.name for v in fixed.variables}


def test_a_stop_gradient_with_a_training_layer_upstream_is_not_intended(checked: Checked) -> None:
    report = checked["reports"]["partial"]
    assert _codes(report)["middle/kernel"] == {"GC101"}
    assert not report.intended
    assert verdict_parts(report)[0] == "2 of 6 trainable variables are dead"


def test_a_network_this_loss_never_uses_hints_at_another_loss(checked: Checked) -> None:
    report = checked["plain"]
    assert _codes(report)["discriminator/score/kernel"] == {"GC108"}  # still an error
    fix = report.fixes["discriminator/score/kernel"]
    assert fix.startswith("if another loss trains discriminator (a GAN discriminator")
    assert 'allow-dead = ["discriminator/*"]' in fix


@pytest.mark.parametrize("case", ["distill", "dqn", "vq", "g", "plain"])
def test_terminal_report_matches_golden(
    case: str, checked: Checked, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = checked["plain"] if case == "plain" else checked["reports"][case]
    fixed_machine(monkeypatch)
    assert_matches_golden(golden_terminal(report), f"intent_{case}.txt", request)


def test_routes_name_the_layers_as_their_variables_do(checked: Checked) -> None:
    # Keras names the ops of a call by the call (`teacher_1/teacher_0_1/MatMul`), the weights by
    # the layer (`teacher/teacher_0/kernel`): a route shows the layer.
    report = checked["reports"]["distill"]
    kernel = next(v for v in report.variables if v.name == "teacher/teacher_0/kernel")
    layers = [step.layer for step in kernel.route if step.layer is not None]
    assert layers[:2] == ["teacher/teacher_0", "teacher/teacher_0"]
    assert "teacher/teacher_1" in layers
    assert all(layer.startswith("teacher/") for layer in layers)
