"""Dogfood: gradcheck's verdicts on sample_models/ agree with TensorFlow's own gradients.

TensorFlow is the judge (tests/oracle.py): for every sample, as a script and as a SavedModel,
the variables gradcheck calls dead must be exactly those whose gradient is None or all zeros.
The TF1 scripts are checked through the command line (in this process: gradcheck runs each
script in its own worker, so their `tf.disable_v2_behavior()` never reaches this process).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import forked_python
from tests.cli_runs import Ran, invoke

try:
    from tests import oracle
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
    import oracle  # type: ignore[no-redef,import-not-found]

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_models"

# Every sample script, with the exit code its README documents.
DOCUMENTED_EXIT_CODES = {
    "faulty_weights_tf1.py": 1,
    "faulty_weights_fixed.py": 0,
    "module_tf2.py": 1,
    "keras_unused_layer.py": 1,
    "write_savedmodel.py": 1,
}
TF1_SCRIPTS = ("faulty_weights_tf1.py", "faulty_weights_fixed.py")
# Samples also checked as SavedModels: write_savedmodel.py writes its own; the other TF2 scripts
# are saved by _SAVE_SCRIPTS below.
SAVED_SAMPLES = ("write_savedmodel.py", "module_tf2.py", "keras_unused_layer.py")

CASES = [("script", name) for name in DOCUMENTED_EXIT_CODES] + [
    ("savedmodel", name) for name in SAVED_SAMPLES
]
CASE_IDS = [f"{form}:{name}" for form, name in CASES]

SUBPROCESS_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
TIMEOUT_SECONDS = 300

# Saves TF2 sample scripts as SavedModels, in one process: argv = [script, out_dir, ...].
# write_savedmodel.py saves itself through its `main`; for the others the root holds the
# script's module-level trackables (so variables the loss never reads are saved too) and `loss`.
_SAVE_SCRIPTS = r"""
import runpy, sys
import tensorflow as tf

for script, out_dir in zip(sys.argv[1::2], sys.argv[2::2]):
    namespace = runpy.run_path(script, run_name="gradcheck_sample")
    if script.endswith("write_savedmodel.py"):
        namespace["main"](out_dir)
        continue
    root = tf.Module()
    for name, value in namespace.items():
        trackable = isinstance(value, (tf.Variable, tf.__internal__.tracking.AutoTrackable))
        if trackable and not name.startswith("_") and not isinstance(value, type):
            setattr(root, name, value)
    root.loss = namespace["loss"]
    options = tf.saved_model.SaveOptions(save_debug_info=True)
    tf.saved_model.save(root, out_dir, options=options)
"""


def _cli(path: Path) -> Ran:
    """`gradcheck PATH --loss loss --format json`, in this process."""
    from gradcheck_cli.cli import command

    return invoke(command, [path, "--loss", "loss", "--format", "json"])


def _wait(process: forked_python.ForkedProcess) -> Ran:
    stdout, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
    assert process.returncode is not None
    return Ran(process.returncode, stdout or "", stderr)


def _statuses_from_api(path: Path) -> dict[str, str]:
    from gradcheck_cli import api

    report = api.check(str(path), loss="loss")
    return {v.name: v.status.value for v in report.variables}


def _statuses_of_savedmodels(paths: dict[str, Path]) -> dict[str, dict[str, str]]:
    return {name: _statuses_from_api(path) for name, path in paths.items()}


@dataclass
class Background:
    """TensorFlow's answers (forked processes, awaited lazily) and gradcheck's (in this process,
    one check at a time)."""

    oracles: dict[tuple[str, str], oracle.PendingVerdicts]
    savedmodels: dict[str, Path]
    save_errors: dict[str, str]
    cli: dict[str, Ran]
    # gradcheck's statuses for the TF2 scripts, and for every SavedModel at once.
    script_checks: dict[str, Future[dict[str, str]]]
    savedmodel_checks: Future[dict[str, dict[str, str]]]

    def tensorflow(self, form: str, name: str) -> dict[str, str]:
        if form == "savedmodel" and name in self.save_errors:
            pytest.fail(f"could not write the SavedModel of {name}:\n{self.save_errors[name]}")
        return self.oracles[form, name].result()

    def cli_run(self, name: str) -> Ran:
        return self.cli[name]


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # Every TensorFlow process starts here at once: the suite is bound by TensorFlow's import
    # time, not by the tests.
    out = tmp_path_factory.mktemp("sample_savedmodels")
    oracles: dict[tuple[str, str], oracle.PendingVerdicts] = {}
    for name in DOCUMENTED_EXIT_CODES:
        oracles["script", name] = oracle.start_dead_in_script(str(SAMPLES / name), "loss")
    targets = {name: out / Path(name).stem for name in SAVED_SAMPLES}
    saver = forked_python.start(
        ["-c", _SAVE_SCRIPTS]
        + [str(part) for name in SAVED_SAMPLES for part in (SAMPLES / name, targets[name])],
        SUBPROCESS_ENV,
    )
    # One at a time in the background: after the first, each worker forks from gradcheck's warm
    # launcher, which serves one worker at a time.
    executor = ThreadPoolExecutor(max_workers=1)
    script_checks = {
        name: executor.submit(_statuses_from_api, SAMPLES / name)
        for name in DOCUMENTED_EXIT_CODES
        if name not in TF1_SCRIPTS
    }
    # The command line in this thread (click's runner swaps this process's stdout), once the
    # API's checks are done: the warm launcher serves one worker at a time.
    wait(script_checks.values())
    cli = {name: _cli(SAMPLES / name) for name in TF1_SCRIPTS}
    saved = _wait(saver)
    savedmodels, save_errors = {}, {}
    for name, target in targets.items():
        if saved.returncode != 0 or not (target / "saved_model.pb").exists():
            save_errors[name] = saved.stderr[-4000:]
            continue
        savedmodels[name] = target
        oracles["savedmodel", name] = oracle.start_dead_in_savedmodel(str(target), "loss")
    # SavedModels are analysed in this process, one after another in one thread.
    savedmodel_checks = executor.submit(_statuses_of_savedmodels, savedmodels)
    state = Background(oracles, savedmodels, save_errors, cli, script_checks, savedmodel_checks)
    yield state
    executor.shutdown(wait=True, cancel_futures=True)
    for pending in oracles.values():
        pending.cancel()


def _json_report(finished: Ran) -> dict[str, Any]:
    try:
        return json.loads(finished.stdout)
    except ValueError:
        pytest.fail(
            f"gradcheck exited {finished.returncode} without a JSON report on stdout\n"
            f"stdout: {finished.stdout[-2000:]}\nstderr: {finished.stderr[-4000:]}"
        )


@pytest.fixture(scope="module")
def gradcheck_statuses(background: Background) -> Any:
    """{(form, sample): {variable name: gradcheck status}}, computed once per sample on demand."""
    cache: dict[tuple[str, str], dict[str, str]] = {}

    def statuses(form: str, name: str) -> dict[str, str]:
        if (form, name) not in cache:
            if form == "script" and name in TF1_SCRIPTS:
                report = _json_report(background.cli_run(name))
                cache[form, name] = {v["name"]: v["status"] for v in report["variables"]}
            elif form == "savedmodel" and name in background.save_errors:
                pytest.fail(f"could not write the SavedModel of {name}")
            elif form == "savedmodel":
                cache[form, name] = background.savedmodel_checks.result()[name]
            else:
                cache[form, name] = background.script_checks[name].result()
        return cache[form, name]

    return statuses


def _disagreements(gradcheck: dict[str, str], tensorflow: dict[str, str]) -> list[str]:
    lines = []
    for name in sorted(set(gradcheck) | set(tensorflow)):
        gradcheck_dead = gradcheck.get(name) in ("blocked", "unused")
        tensorflow_dead = tensorflow.get(name) in oracle.DEAD
        if gradcheck_dead != tensorflow_dead:
            lines.append(
                f"{name}: gradcheck says {gradcheck.get(name, 'not reported')}, "
                f"TensorFlow says {tensorflow.get(name, 'not a trainable variable')}"
            )
    return lines


@pytest.mark.parametrize(("form", "name"), CASES, ids=CASE_IDS)
def test_dead_variables_agree_with_tensorflow(
    background: Background, gradcheck_statuses: Any, form: str, name: str
) -> None:
    tensorflow = background.tensorflow(form, name)
    gradcheck = gradcheck_statuses(form, name)
    assert _disagreements(gradcheck, tensorflow) == []


@pytest.mark.parametrize(("form", "name"), CASES, ids=CASE_IDS)
def test_every_trainable_variable_is_reported(
    background: Background, gradcheck_statuses: Any, form: str, name: str
) -> None:
    tensorflow = background.tensorflow(form, name)
    gradcheck = gradcheck_statuses(form, name)
    assert sorted(set(tensorflow) - set(gradcheck)) == []
    frozen = sorted(n for n in tensorflow if gradcheck[n] == "frozen")
    assert frozen == [], "trainable variables reported as frozen"


@pytest.mark.parametrize("name", list(DOCUMENTED_EXIT_CODES))
def test_sample_shows_what_its_readme_says(background: Background, name: str) -> None:
    """The samples themselves: TensorFlow finds a dead variable exactly where the README says."""
    tensorflow = background.tensorflow("script", name)
    assert bool(oracle.dead_names(tensorflow)) == (DOCUMENTED_EXIT_CODES[name] == 1)
    if name in SAVED_SAMPLES:
        assert background.tensorflow("savedmodel", name) == tensorflow


def _line(path: Path, location: dict[str, Any] | None) -> str:
    """The source line a JSON location points at, checking that it is a line of `path`."""
    assert location is not None, "blocker without a source location"
    file = Path(location["file"])
    file = file if file.is_absolute() else ROOT / file
    assert file.exists() and file.samefile(path), f"{location} is not in {path}"
    lines = path.read_text().splitlines()
    assert 1 <= location["line"] <= len(lines), f"{location} is not a line of {path}"
    return lines[location["line"] - 1]


def test_stack_overflow_case_through_the_cli(background: Background) -> None:
    """The acceptance test: the seed's script, its dead weight and the ops that cut it."""
    script = SAMPLES / "faulty_weights_tf1.py"
    tensorflow = background.tensorflow("script", "faulty_weights_tf1.py")
    (weights_i,) = [n for n in tensorflow if n.rpartition("/")[2] == "weights_i"]
    biases = weights_i.rpartition("/")[0] + "/biases"
    assert tensorflow[weights_i] in oracle.DEAD
    assert tensorflow[biases] == "gradient"

    finished = background.cli_run("faulty_weights_tf1.py")
    report = _json_report(finished)
    assert finished.returncode == 1, finished.stderr[-4000:]
    assert report["schema"] == "gradcheck/1"
    verdicts = {v["name"]: v for v in report["variables"]}
    assert verdicts[biases]["status"] == "ok"
    weights = verdicts[weights_i]
    assert weights["status"] == "blocked"

    stop_gradients = [b for b in weights["blockers"] if b["op_type"] == "StopGradient"]
    casts = [b for b in weights["blockers"] if b["op_type"] == "Cast"]
    assert stop_gradients, weights["blockers"]
    assert casts, weights["blockers"]
    for blocker in stop_gradients:
        assert blocker["reason"] == "stop_gradient"
        assert "tf.stop_gradient(" in _line(script, blocker["location"])
    for blocker in casts:
        assert blocker["reason"] == "integer_dtype"
        assert "tf.cast(" in _line(script, blocker["location"])


def test_straight_through_fix_exits_clean(background: Background) -> None:
    tensorflow = background.tensorflow("script", "faulty_weights_fixed.py")
    assert oracle.dead_names(tensorflow) == set()
    finished = background.cli_run("faulty_weights_fixed.py")
    report = _json_report(finished)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert report["summary"]["blocked"] == report["summary"]["unused"] == 0
