"""Clean public training code, adapted small (tests/scripts/clean/, each file names its source):
`gradcheck run` exits 0 on each with no error and no warning, every variable of the checked step
`ok`, and TensorFlow's own gradients (`--verify`) agree. A warning on clean code costs trust as a
false error does.

gradcheck stops a script at its first weight change. A model the script trains only in a later
phase is told as what is known (info GC207, "given to no gradient request of the step checked"):
TensorFlow's own run of the whole script trains it later. So is a generator that the critic's
loss reads when the generator's own request comes after the critic's update: a request gradcheck
never reached."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import run_command
from tests import forked_python
from tests.cli_runs import invoke

CLEAN = Path(__file__).resolve().parents[1] / "scripts" / "clean"
# Keras 3 and TensorFlow alone.
CORE = (
    "dcgan.py",
    "pix2pix.py",
    "cvae.py",
    "quickstart_advanced.py",
    "custom_training_walkthrough.ipynb",
    "mnist_convnet.py",
    "text_transformer.py",
    "vae_train_step.py",
    "wgan_gp.py",
    "dqn_target_network.py",
    "eager_gan_critic_first.py",
)
# Keras 2 (tf_keras), TensorFlow Probability, TF-MOT: the `libraries` extra.
LIBRARIES = (
    "keras2_text_classification.py",
    "knowledge_distillation.py",
    "tfp_gp_regression.py",
    "tfp_variational_regression.py",
    "pruning_comprehensive_guide.ipynb",
)
SCRIPTS = [pytest.param(name, id=name) for name in CORE] + [
    pytest.param(name, id=name, marks=pytest.mark.libraries) for name in LIBRARIES
]


@pytest.fixture(scope="module")
def checked() -> Callable[[str], list[dict[str, Any]]]:
    """Each script's reports (`gradcheck run SCRIPT --verify -f json`), checked once."""
    done: dict[str, list[dict[str, Any]]] = {}

    def check(name: str) -> list[dict[str, Any]]:
        if name not in done:
            code, out, err = invoke(run_command, [CLEAN / name, "--verify", "-f", "json"])
            assert code == 0, out + err
            reports = json.loads(out)
            done[name] = reports if isinstance(reports, list) else [reports]
        return done[name]

    return check


@pytest.mark.parametrize("name", SCRIPTS)
def test_clean_training_code_gets_no_error_and_no_warning(
    name: str, checked: Callable[[str], list[dict[str, Any]]]
) -> None:
    reports = checked(name)
    loud = [
        (f["code"], f["message"])
        for report in reports
        for f in report["findings"]
        if f["severity"] != "info"
    ]
    assert loud == [], loud
    assert {v["status"] for report in reports for v in report["variables"]} == {"ok"}
    for report in reports:  # TensorFlow's gradients of each request agree (GC003)
        codes = {f["code"] for f in report["findings"]}
        assert "GC003" in codes and "GC002" not in codes, report["findings"]


@pytest.mark.libraries
def test_models_trained_after_the_first_step_are_told_as_what_is_known(
    checked: Callable[[str], list[dict[str, Any]]], tmp_path: Path
) -> None:
    # The teacher's fit is the first step; the student (distilled) and its clone (its own fit)
    # are trained after it, which gradcheck, stopped at the first weight change, cannot see.
    script = CLEAN / "knowledge_distillation.py"
    (report,) = checked(script.name)
    (told,) = [f for f in report["findings"] if f["code"] == "GC207"]
    assert told["severity"] == "info"
    assert "of the step checked" in told["message"] and "a later step may" in told["message"]
    found = re.search(r"(\d+) trainable variables", told["message"])
    assert found is not None
    # TensorFlow's own run of the whole script (tests.run_oracle): a request per call site.
    out = tmp_path / "tensorflow.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], cwd=tmp_path)
    answer = json.loads(out.read_text())
    assert answer["error"] is None, answer["error"]
    first, *later = answer["requests"]
    assert first["location"]["line"] == report["source"]["request"]["location"]["line"]
    assert len(first["variables"]) == len(report["variables"]) == 6
    # It trains every one of them, in the script's later steps.
    assert sum(len(r["variables"]) for r in later) == int(found.group(1)) == 12
    assert [r["none"] for r in answer["requests"]] == [[], [], []]


def test_a_model_whose_request_the_run_never_reached_is_not_a_warning(
    checked: Callable[[str], list[dict[str, Any]]], tmp_path: Path
) -> None:
    # The critic's loss reads the generator (its fakes are made in the critic's tape), and the
    # critic's update comes before the generator's request: the run stops there.
    script = CLEAN / "eager_gan_critic_first.py"
    (report,) = checked(script.name)
    (told,) = [f for f in report["findings"] if f["code"] == "GC207"]
    lines = script.read_text().splitlines()
    (later,) = [n for n, text in enumerate(lines, 1) if "tape.gradient(g_loss" in text]
    assert f"before the gradient request at {script.name}:{later}" in told["message"]
    assert told["message"].startswith("4 trainable variables")
    # TensorFlow's own run of the whole script: the generator's request, at that line, trains
    # the four variables gradcheck told.
    out = tmp_path / "tensorflow.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], cwd=tmp_path)
    answer = json.loads(out.read_text())
    assert answer["error"] is None, answer["error"]
    first, second = answer["requests"][:2]
    assert first["location"]["line"] == report["source"]["request"]["location"]["line"]
    assert second["location"]["line"] == later and len(second["variables"]) == 4
    assert second["none"] == []
