"""The exit policy on the command line: allow-dead, fail-on, exit-zero, baselines, many models."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli import api
from gradcheck_cli.cli import ExitCode, command
from gradcheck_cli.errors import error_line
from gradcheck_cli.findings.report import Report
from gradcheck_cli.options import CheckOptions
from tests.cli_runs import Ran, invoke
from tests.shared_checks import RepositoryChecks
from tests.tf_oracle_inprocess import dead_names, tf_verdicts

FAULTY = Path(__file__).parent.parent / "sample_models" / "faulty_weights_tf1.py"


def _run(*args: str | Path) -> Ran:
    return invoke(command, args)


# --- the seed script: its report is computed once (a TensorFlow subprocess) and reused ----------


@pytest.fixture(scope="module")
def faulty_report(repository_checks: RepositoryChecks) -> Report:
    return repository_checks.start("sample_models/faulty_weights_tf1.py", "loss").result()


@pytest.fixture
def cached(monkeypatch: pytest.MonkeyPatch, faulty_report: Report) -> None:
    """The seed script's report answers from the module's one real run; the options that
    apply after the analysis (allow_dead, then the run's policy) still run for real."""
    real = api.model_report

    def model_report(
        model: Any, options: CheckOptions, variables: Any = None, sources: Any = ()
    ) -> Report:
        if Path(model).resolve() == FAULTY.resolve() and options.loss == "loss" and not sources:
            return faulty_report
        return real(model, options, variables, sources)

    monkeypatch.setattr(api, "model_report", model_report)


def test_seed_script_fails_without_a_policy(cached: None) -> None:
    code, out, _ = _run(FAULTY, "--loss", "loss", "--color", "never")
    assert code == ExitCode.DEAD_VARIABLES
    assert "weights_i" in out and "GC007" not in out


def test_allow_dead_flag_turns_exit_1_into_0(cached: None) -> None:
    code, out, err = _run(FAULTY, "--loss", "loss", "--allow-dead", "*weights_i", "--color=never")
    assert code == ExitCode.CLEAN, err
    assert "GC007" in out and "allowed" in out


def test_allow_dead_from_a_config_file(cached: None, tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.gradcheck]\nallow-dead = { "*weights_i" = "faulty on purpose" }\n')
    code, out, _ = _run(FAULTY, "--loss", "loss", "--config", config, "-f", "json")
    assert code == ExitCode.CLEAN
    (allowed,) = [f for f in json.loads(out)["findings"] if f["code"] == "GC007"]
    assert allowed["variable"] == "hidden1/weights_i"
    assert "faulty on purpose" in allowed["message"]


def test_fail_on_never_and_exit_zero_exit_0(cached: None) -> None:
    assert _run(FAULTY, "--loss", "loss", "--fail-on", "never")[0] == ExitCode.CLEAN
    assert _run(FAULTY, "--loss", "loss", "--exit-zero")[0] == ExitCode.CLEAN


def test_exit_zero_never_hides_exit_2(cached: None, tmp_path: Path) -> None:
    code, out, err = _run(FAULTY, tmp_path / "missing", "--loss", "loss", "--exit-zero")
    assert code == ExitCode.ERROR
    assert "no such file" in err and "weights_i" in out


def test_config_end_to_end_in_a_subprocess(
    tmp_path: Path, saved: dict[str, tuple[Path, set[str]]]
) -> None:
    """The real thing once: a config file whose loss table and paths are relative to it. (A
    SavedModel, which gradcheck reads without TensorFlow: no TensorFlow import to wait for.)"""
    model, dead = saved["before"]
    assert dead
    shutil.copytree(model, tmp_path / "models" / "small")
    config = tmp_path / "pyproject.toml"
    allowed = ", ".join(json.dumps(name) for name in sorted(dead))
    config.write_text(
        f'[tool.gradcheck]\nloss = {{ "models/*" = "loss" }}\nallow-dead = [{allowed}]\n'
        'format = "json"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", "small", "--config", str(config)],
        cwd=tmp_path / "models",
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == ExitCode.CLEAN, result.stderr
    report = json.loads(result.stdout)
    assert report["source"]["loss"] == "loss"
    allowed_found = [f["variable"] for f in report["findings"] if f["code"] == "GC007"]
    assert sorted(allowed_found) == sorted(dead)


# --- small SavedModels written by TensorFlow: checked in-process, fast ------------------------


def _modules() -> dict[str, Any]:
    import tensorflow as tf

    spec = [tf.TensorSpec([None, 2], tf.float32)]

    class Clean(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kernel = tf.Variable([[1.0], [2.0]], name="kernel")

        @tf.function(input_signature=spec)
        def loss(self, x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(tf.matmul(x, self.kernel))

    class Before(Clean):
        def __init__(self) -> None:
            super().__init__()
            self.scale = tf.Variable(2.0, name="scale")

        @tf.function(input_signature=spec)
        def loss(self, x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(tf.matmul(x, self.kernel) * tf.stop_gradient(self.scale))

    class After(Before):
        def __init__(self) -> None:
            super().__init__()
            self.bias = tf.Variable(0.5, name="bias")

        @tf.function(input_signature=spec)
        def loss(self, x: tf.Tensor) -> tf.Tensor:
            shifted = tf.matmul(x, self.kernel) + tf.cast(tf.cast(self.bias, tf.int32), tf.float32)
            return tf.reduce_sum(shifted * tf.stop_gradient(self.scale))

    class Warned(Clean):
        @tf.function(input_signature=spec)
        def loss(self, x: tf.Tensor) -> tf.Tensor:
            # A tf.stop_gradient with no variable upstream: a warning (GC203), nothing dead.
            return tf.reduce_sum(tf.matmul(tf.stop_gradient(x * 2.0), self.kernel))

    return {"clean": Clean(), "before": Before(), "after": After(), "warned": Warned()}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, set[str]]]:
    """name -> (SavedModel path, the variables TensorFlow's tape gives no gradient)."""
    import tensorflow as tf

    root = tmp_path_factory.mktemp("policy")
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    models = {}
    for name, module in _modules().items():
        path = root / name / "model"
        tf.saved_model.save(module, str(path))
        verdicts = tf_verdicts(module.loss, module.trainable_variables, [x])
        models[name] = (path, dead_names(verdicts))
    return models


def _failing(report: dict[str, Any]) -> set[str]:
    return {f["variable"] for f in report["findings"] if f["severity"] == "error"}


def test_baseline_accepts_todays_dead_and_fails_on_new_ones(
    saved: dict[str, tuple[Path, set[str]]], tmp_path: Path
) -> None:
    before, dead_before = saved["before"]
    after, dead_after = saved["after"]
    assert dead_before and dead_after - dead_before  # the models test what they should
    baseline = before.parent / "baseline.json"
    code, out, err = _run(before, "--loss", "loss", "--write-baseline", baseline)
    assert code == ExitCode.CLEAN and out == "" and str(baseline) in err
    written = json.loads(baseline.read_text())
    assert written == {"schema": "gradcheck-baseline/1", "models": {"model": sorted(dead_before)}}

    assert _run(before, "--loss", "loss")[0] == ExitCode.DEAD_VARIABLES
    code, out, _ = _run(before, "--loss", "loss", "--baseline", baseline, "-f", "json")
    assert code == ExitCode.CLEAN
    assert _failing(json.loads(out)) == set()

    # The baseline stores paths relative to itself: next to the changed model it still applies.
    moved = after.parent / "baseline.json"
    shutil.copy(baseline, moved)
    config = tmp_path / "gradcheck.toml"
    config.write_text(f'baseline = "{moved.as_posix()}"\nloss = "loss"\n')
    code, out, _ = _run(after, "--config", config, "-f", "json")
    assert code == ExitCode.DEAD_VARIABLES
    assert _failing(json.loads(out)) == dead_after - dead_before


def test_several_models_exit_with_the_worst_code(
    saved: dict[str, tuple[Path, set[str]]], tmp_path: Path
) -> None:
    clean, _ = saved["clean"]
    before, dead_before = saved["before"]
    code, out, _ = _run(clean, "--loss", "loss", "-f", "json")
    assert code == ExitCode.CLEAN and _failing(json.loads(out)) == set()

    code, out, err = _run(clean, before, "--loss", "loss", "-f", "json")
    assert code == ExitCode.DEAD_VARIABLES and err == ""
    reports = json.loads(out)
    assert [r["source"]["path"] for r in reports] == [str(clean), str(before)]
    assert [_failing(r) for r in reports] == [set(), dead_before]

    missing = tmp_path / "missing"
    code, out, err = _run(clean, missing, before, "--loss", "loss", "-f", "json")
    assert code == ExitCode.ERROR
    said = error_line(f"{missing}: no such file or directory")  # a deep tmp path: shortened
    assert err.strip().splitlines() == [f"gradcheck: error: {said}"]
    entries = json.loads(out)
    assert [r["source"]["path"] for r in entries] == [str(clean), str(missing), str(before)]
    assert entries[1]["error"] == said


def test_jobs_2_gives_the_same_reports_as_jobs_1(
    saved: dict[str, tuple[Path, set[str]]],
) -> None:
    paths = [saved[name][0] for name in ("after", "clean", "before")]
    serial = _run(*paths, "--loss", "loss", "-f", "json", "--jobs", "1")
    parallel = _run(*paths, "--loss", "loss", "-f", "json", "--jobs", "2")
    assert serial == parallel
    assert serial[0] == ExitCode.DEAD_VARIABLES


def test_output_file_keeps_stdout_empty(
    saved: dict[str, tuple[Path, set[str]]], tmp_path: Path
) -> None:
    clean, _ = saved["clean"]
    before, dead_before = saved["before"]
    target = tmp_path / "report.json"
    code, out, err = _run(before, "--loss", "loss", "-f", "json", "-o", target)
    assert (code, out, err) == (ExitCode.DEAD_VARIABLES, "", "")
    assert _failing(json.loads(target.read_text())) == dead_before
    # Machine formats are written even when clean.
    code, out, _ = _run(clean, "--loss", "loss", "-f", "sarif", "-o", target)
    assert (code, out) == (ExitCode.CLEAN, "")
    assert json.loads(target.read_text())["version"] == "2.1.0"


def test_fail_on_warning_fails_on_warnings_left_after_ignore(
    saved: dict[str, tuple[Path, set[str]]],
) -> None:
    warned, dead = saved["warned"]
    assert not dead
    code, out, _ = _run(warned, "--loss", "loss", "-f", "json")
    assert code == ExitCode.CLEAN
    assert {f["severity"] for f in json.loads(out)["findings"]} >= {"warning"}
    assert _run(warned, "--loss", "loss", "--fail-on", "warning")[0] == ExitCode.DEAD_VARIABLES
    code = _run(warned, "--loss", "loss", "--fail-on", "warning", "--ignore", "GC2")[0]
    assert code == ExitCode.CLEAN
