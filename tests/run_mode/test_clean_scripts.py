"""Clean public training code, adapted small (tests/scripts/clean/, each file names its source):
`gradcheck run` exits 0 on each with no error and no warning, every variable of the checked step
`ok`, and TensorFlow's own gradients (`--verify`) agree. A warning on clean code costs trust as a
false error does.

gradcheck stops a script at its first weight change, once the step reached every request the
script holds (a generator's request after the critic's update is checked too), or before the
loop comes around. A model the script trains only in a later phase is told as what is known
(info GC207, "given to no gradient request of the step checked"): TensorFlow's own run of the
whole script trains it later."""

from __future__ import annotations

import json
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
    "ddpg_pendulum.py",
    "neural_style_transfer.py",
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
    """Each script's reports (`gradcheck run SCRIPT --verify -v -f json`), checked once."""
    done: dict[str, list[dict[str, Any]]] = {}

    def check(name: str) -> list[dict[str, Any]]:
        if name not in done:
            args = [CLEAN / name, "--verify", "-v", "-f", "json"]
            code, out, err = invoke(run_command, args)
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
def test_each_phase_whose_request_the_step_reaches_is_checked(
    checked: Callable[[str], list[dict[str, Any]]], tmp_path: Path
) -> None:
    # The teacher's fit (one batch) ends before any weight changes twice; the student (by the
    # Distiller's train_step) and its clone (its own fit) come after it, each reached in turn.
    script = CLEAN / "knowledge_distillation.py"
    reports = checked(script.name)
    out = tmp_path / "tensorflow.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], cwd=tmp_path)
    answer = json.loads(out.read_text())
    assert answer["error"] is None, answer["error"]
    assert len(reports) == len(answer["requests"]) == 3
    for report, request in zip(reports, answer["requests"], strict=True):
        assert report["source"]["request"]["location"]["line"] == request["location"]["line"]
        assert len(report["variables"]) == len(request["variables"]) == 6
        assert request["none"] == []


def test_a_step_goes_on_to_the_requests_it_holds_after_its_first_update(
    checked: Callable[[str], list[dict[str, Any]]], tmp_path: Path
) -> None:
    # The critic's loss reads the generator (its fakes are made in the critic's tape), and the
    # critic's update comes before the generator's request: the run goes on to that request,
    # and stops before the generator's update.
    script = CLEAN / "eager_gan_critic_first.py"
    critic, generator = checked(script.name)
    lines = script.read_text().splitlines()
    (later,) = [n for n, text in enumerate(lines, 1) if "tape.gradient(g_loss" in text]
    assert generator["source"]["request"]["location"]["line"] == later
    codes = {f["code"] for report in (critic, generator) for f in report["findings"]}
    assert "GC207" not in codes and "GC213" not in codes, codes
    # TensorFlow's own run of the whole script: the same two requests, the same variables.
    out = tmp_path / "tensorflow.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], cwd=tmp_path)
    answer = json.loads(out.read_text())
    assert answer["error"] is None, answer["error"]
    for report, request in zip((critic, generator), answer["requests"][:2], strict=True):
        assert report["source"]["request"]["location"]["line"] == request["location"]["line"]
        assert sorted(v["name"] for v in report["variables"]) == sorted(request["variables"])
        assert request["none"] == []


def test_a_target_network_is_told_as_a_copy_to_its_batch_norms_constants(
    checked: Callable[[str], list[dict[str, Any]]],
) -> None:
    # keras-io's DDPG: target networks made by the same builders, then `set_weights`; their
    # batch norms' scales (ones) and offsets (zeros) hold no value of their own to compare.
    reports = checked("ddpg_pendulum.py")
    critic = reports[0]
    (copies,) = [f for f in critic["findings"] if f["code"] == "GC214"]
    # The critic's request reads both targets: 5 + 5 dense layers, 4 + 2 batch norms.
    assert copies["message"].startswith("30 trainable variables"), copies["message"]
    codes = [f["code"] for report in reports for f in report["findings"]]
    # Keras's batch norm stops the gradient of its mean inside its variance, by design: a
    # library's own cut, never told as one of the user's (GC204).
    assert "GC204" not in codes and "GC213" not in codes, codes


def test_an_image_optimised_through_a_fixed_extractor_is_not_a_warning(
    checked: Callable[[str], list[dict[str, Any]]], tmp_path: Path
) -> None:
    script = CLEAN / "neural_style_transfer.py"
    (report,) = checked(script.name)
    assert [v["name"] for v in report["variables"]] == ["Variable"]
    (told,) = [f for f in report["findings"] if f["code"] == "GC207"]
    assert told["severity"] == "info" and told["message"].startswith("20 trainable variables")
    out = tmp_path / "tensorflow.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], cwd=tmp_path)
    answer = json.loads(out.read_text())
    assert answer["error"] is None, answer["error"]
    # TensorFlow's run of the whole script asks for the image's gradient only, every time.
    assert {len(request["variables"]) for request in answer["requests"]} == {1}
