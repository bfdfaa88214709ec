"""End to end: `gradcheck run` on real training scripts agrees with TensorFlow, request by request.

TensorFlow is the judge (tests/run_oracle.py runs each script with its gradient entry points
wrapped): for every gradient request, the variables gradcheck calls dead must be exactly those
TensorFlow gives a None gradient, and the script must be stopped before its first weight change
(each script writes a marker file after its first optimizer step). The module fixture starts
TensorFlow's runs in the background (forked, a few at a time), runs gradcheck on every script
in this process meanwhile, and each test reads the results it needs; no script runs twice under
the same tool.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import command, run_command
from tests import forked_python
from tests.cli_runs import Ran, invoke
from tests.docs_pages import code_blocks

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts" / "run"
SEED = ROOT / "sample_models" / "faulty_weights_tf1.py"
# Variables a tf.function step creates on its first call (tensorflow/tensorflow#26812).
CREATES_IN_STEP = ROOT / "tests" / "public_reports" / "tf26812_round_in_tf_function.py"
MARKER_VARIABLE = "GRADCHECK_TEST_MARKER"
SUBPROCESS_ENV = {
    **{k: v for k, v in os.environ.items() if k != MARKER_VARIABLE},
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_ENABLE_ONEDNN_OPTS": "0",
}
PARALLEL_PROCESSES = 2  # oracles at once, forked: CI has two cores
TIMEOUT_SECONDS = 300
NOT_DEAD = frozenset({"ok", "frozen"})


@dataclass(frozen=True)
class Case:
    """A training script, its arguments, and what its report must show beyond the oracle's."""

    name: str
    script: Path
    args: tuple[str, ...] = ()
    # Text on the script line every blocked variable's blockers must include, if one is known.
    blocker_text: str | None = None
    # The script trains when run plainly, so its marker proves the marker mechanism works.
    trains_plainly: bool = False
    # A line the script prints before training: its arguments arrived, its output went to stderr.
    prints: str | None = None


CASES = [
    Case("keras_fit_unused", SCRIPTS / "keras_fit_unused.py", trains_plainly=True),
    Case("gan_train_step", SCRIPTS / "gan_train_step.py", blocker_text="tf.stop_gradient("),
    Case(
        "tf_function_argmax",
        SCRIPTS / "tf_function_argmax.py",
        args=("--hidden", "5", "--steps", "2"),
        blocker_text="tf.argmax(",
        prints="hidden units: 5",
    ),
    Case("eager_numpy_loop", SCRIPTS / "eager_numpy_loop.py", trains_plainly=True),
    Case("teacher_student", SCRIPTS / "teacher_student.py", trains_plainly=True),
    Case("faulty_weights_tf1", SEED),
    Case(
        "subclassed_fit",
        SCRIPTS / "subclassed_fit.py",
        blocker_text="tf.stop_gradient(",
        trains_plainly=True,
    ),
    Case("step_creates_variables", CREATES_IN_STEP, blocker_text="tf.round(self.q)"),
]
CASE_IDS = [case.name for case in CASES]


def _run_oracle(argv: list[str], cwd: Path) -> Ran:
    """The oracle forks from a process that imported TensorFlow once (`forked_python`)."""
    code, stderr = forked_python.run(argv, SUBPROCESS_ENV, cwd, TIMEOUT_SECONDS, check=False)
    return Ran(code, "", stderr)


def _gradcheck(args: list[str], marker: Path) -> Ran:
    """`gradcheck ARGS` (or `gradcheck run ...`) in this process, where its workers fork warm;
    the script writes `marker` after its first weight change."""
    if args[0] == "run":
        cli, args = run_command, args[1:]
    else:
        cli = command
    return invoke(cli, args, env={MARKER_VARIABLE: str(marker)})


def _gradcheck_run(case: Case) -> list[str]:
    after_dashes = ["--", *case.args] if case.args else []
    return ["run", str(case.script), "-f", "json", *after_dashes]


@dataclass
class Runs:
    """gradcheck's runs, done; TensorFlow's, each awaited when first read. A script writes its
    marker after its first weight change: DIR/run/NAME.marker under gradcheck (the path in
    GRADCHECK_TEST_MARKER), NAME.marker in its working folder DIR/oracle under TensorFlow."""

    directory: Path
    gradcheck: dict[tuple[str, str], Ran]
    oracles: dict[str, Future[Ran]]
    _json: dict[tuple[str, str], Any] = field(default_factory=dict)

    def finished(self, tool: str, name: str) -> Ran:
        return self.oracles[name].result() if tool == "oracle" else self.gradcheck[tool, name]

    def marker(self, tool: str, name: str) -> Path:
        return self.directory / tool / f"{name}.marker"

    def reports(self, name: str) -> list[dict[str, Any]]:
        """gradcheck's run-mode reports for a script, one per gradient request."""
        if ("run", name) not in self._json:
            finished = self.finished("run", name)
            try:
                document = json.loads(finished.stdout)
            except json.JSONDecodeError:
                pytest.fail(
                    f"gradcheck run gave no JSON (exit {finished.returncode}):\n"
                    f"stdout: {finished.stdout[-2000:]}\nstderr: {finished.stderr[-4000:]}"
                )
            self._json["run", name] = document if isinstance(document, list) else [document]
        return self._json["run", name]

    def tensorflow(self, name: str) -> dict[str, Any]:
        """The oracle's answer for a script: its requests and the variables that got None."""
        finished = self.finished("oracle", name)
        out = self.directory / f"{name}.oracle.json"
        assert finished.returncode == 0 and out.exists(), finished.stderr[-4000:]
        answer = json.loads(out.read_text())
        assert answer["requests"], f"TensorFlow saw no gradient request in {name}:\n{answer}"
        return answer


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    directory = tmp_path_factory.mktemp("run_mode")
    for tool in ("run", "oracle"):
        (directory / tool).mkdir()
    pool = ThreadPoolExecutor(PARALLEL_PROCESSES)
    oracles = {
        case.name: pool.submit(
            _run_oracle,
            ["-m", "tests.run_oracle", str(directory / f"{case.name}.oracle.json")]
            + [str(case.script), *case.args],
            directory / "oracle",
        )
        for case in CASES
    }
    jobs: dict[tuple[str, str], list[str]] = {
        ("run", "never_trains"): ["run", str(SCRIPTS / "never_trains.py"), "--timeout", "2"],
        ("run", "crashes_before_training"): [
            *("run", str(SCRIPTS / "crashes_before_training.py"), "-f", "json")
        ],
        ("run -q", "crashes_before_training"): [
            *("run", str(SCRIPTS / "crashes_before_training.py"), "-q")
        ],
        ("static", "faulty_weights_tf1"): [str(SEED), "--loss", "loss", "-f", "json"],
        # The README's first command, as a newcomer types it in the checkout.
        ("run terminal", "faulty_weights_tf1"): ["run", os.path.relpath(SEED)],
        ("run", "deep_dream"): ["run", str(SCRIPTS / "deep_dream.py")],
        ("run", "traced_step_fails"): ["run", str(SCRIPTS / "traced_step_fails.py")],
        ("run terminal", "step_creates_variables"): [*("run", str(CREATES_IN_STEP))],
        ("run", "untracked_layers"): ["run", str(SCRIPTS / "untracked_layers.py")],
        ("run", "two_phases"): ["run", str(SCRIPTS / "two_phases.py"), "-v", "-f", "json"],
    }
    jobs.update({("run", case.name): _gradcheck_run(case) for case in CASES})
    done = {
        (tool, name): _gradcheck(args, directory / "run" / f"{name}.marker")
        for (tool, name), args in jobs.items()
    }
    yield Runs(directory, done, oracles)
    pool.shutdown(wait=True, cancel_futures=True)


def _site(location: dict[str, Any] | None) -> tuple[str, int] | None:
    if location is None:
        return None
    return os.path.realpath(ROOT / location["file"]), location["line"]


def _by_call_site(reports: list[dict[str, Any]]) -> dict[tuple[str, int] | None, dict[str, Any]]:
    return {_site(report["source"]["request"]["location"]): report for report in reports}


def _dead(report: dict[str, Any]) -> set[str]:
    return {v["name"] for v in report["variables"] if v["status"] not in NOT_DEAD}


def _line_of(script: Path, text: str) -> int:
    lines = [n for n, line in enumerate(script.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, f"{text!r} should be on exactly one line of {script.name}: {lines}"
    return lines[0]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_one_report_per_gradient_request(runs: Runs, case: Case) -> None:
    reports = runs.reports(case.name)
    for report in reports:
        assert report["schema"] == "gradcheck/1"
        assert report["source"]["kind"] == "run"
        assert os.path.realpath(ROOT / report["source"]["path"]) == str(case.script)
        assert report["source"]["request"]["api"]
    expected = [_site(request["location"]) for request in runs.tensorflow(case.name)["requests"]]
    assert [_site(r["source"]["request"]["location"]) for r in reports] == expected


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_dead_variables_are_tensorflows_none_gradients(runs: Runs, case: Case) -> None:
    reports = _by_call_site(runs.reports(case.name))
    for request in runs.tensorflow(case.name)["requests"]:
        site = _site(request["location"])
        assert site in reports, f"no report for the request at {site}"
        report = reports[site]
        judged = {v["name"] for v in report["variables"] if v["status"] != "frozen"}
        assert judged == set(request["variables"]), f"variables of the request at {site}"
        assert _dead(report) == set(request["none"]), f"dead variables of the request at {site}"


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_exit_code_says_whether_anything_is_dead(runs: Runs, case: Case) -> None:
    anything_dead = any(request["none"] for request in runs.tensorflow(case.name)["requests"])
    finished = runs.finished("run", case.name)
    assert finished.returncode == (1 if anything_dead else 0), finished.stderr[-4000:]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_script_is_stopped_before_its_first_weight_change(runs: Runs, case: Case) -> None:
    runs.finished("run", case.name)
    assert not runs.marker("run", case.name).exists()
    if case.trains_plainly:  # the marker would have been written had the step run
        runs.tensorflow(case.name)
        assert runs.marker("oracle", case.name).exists()


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_blockers_point_at_the_users_script(runs: Runs, case: Case) -> None:
    expected_line = _line_of(case.script, case.blocker_text) if case.blocker_text else None
    for report in runs.reports(case.name):
        for variable in report["variables"]:
            sites = [_site(blocker["location"]) for blocker in variable["blockers"]]
            located = [site for site in sites if site is not None]
            assert all(file == str(case.script) for file, _ in located), variable
            if expected_line is not None and variable["status"] == "blocked":
                assert expected_line in {line for _, line in located}, variable


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_a_keras_call_that_trains_is_never_told_idle(runs: Runs, case: Case) -> None:
    # A subclassed model has no weight yet when `fit` is called: its first step builds them.
    told = [f for r in runs.reports(case.name) for f in r["findings"] if f["code"] == "GC212"]
    assert told == []


def test_script_arguments_and_output(runs: Runs) -> None:
    case = next(case for case in CASES if case.prints)
    finished = runs.finished("run", case.name)
    assert f"{case.script.name}: {case.prints}" in finished.stderr  # labelled with its name
    assert case.prints not in finished.stdout
    runs.reports(case.name)  # stdout is the JSON report alone


def test_seed_script_run_matches_the_static_check(runs: Runs) -> None:
    (report,) = runs.reports("faulty_weights_tf1")
    static = runs.finished("static", "faulty_weights_tf1")
    assert static.returncode == 1, static.stderr[-4000:]
    expected = json.loads(static.stdout)

    def dead_with_blocker_lines(document: dict[str, Any]) -> dict[str, set[Any]]:
        variables = document["variables"]
        return {
            v["name"]: {_site(b["location"]) for b in v["blockers"]}
            for v in variables
            if v["status"] not in NOT_DEAD
        }

    assert dead_with_blocker_lines(report) == dead_with_blocker_lines(expected)
    finished = runs.finished("run", "faulty_weights_tf1")
    assert "loss after 20 steps" not in finished.stdout + finished.stderr


def test_the_readme_and_getting_started_show_the_first_command_s_real_report(runs: Runs) -> None:
    finished = runs.finished("run terminal", "faulty_weights_tf1")
    assert finished.returncode == 1
    report = finished.stdout.replace(os.path.relpath(SEED), "sample_models/faulty_weights_tf1.py")
    for name, heading in [("README.md", "What you see"), ("getting-started.md", "A first check")]:
        (shown,) = code_blocks(name, heading, "text")
        assert shown == report, f"{name} shows another report than the first command prints"


def test_script_that_never_asks_for_gradients_times_out(runs: Runs) -> None:
    finished = runs.finished("run", "never_trains")
    assert finished.returncode == 2
    assert "did not ask TensorFlow for gradients within 2 s" in finished.stderr
    assert "Traceback" not in finished.stderr + finished.stdout


def test_gradients_with_respect_to_tensors_only_are_told_as_such(runs: Runs) -> None:
    finished = runs.finished("run", "deep_dream")
    line = _line_of(SCRIPTS / "deep_dream.py", "tape.gradient(activation, img)")
    assert finished.returncode == 2
    assert "with respect to tensors only, never a trainable variable" in finished.stderr
    assert f"GradientTape.gradient at line {line} (6 requests)" in finished.stderr
    assert "no GradientTape.gradient" not in finished.stderr


def test_script_that_raises_shows_its_traceback(runs: Runs) -> None:
    finished = runs.finished("run", "crashes_before_training")
    script = SCRIPTS / "crashes_before_training.py"
    raising_line = _line_of(script, "raise ValueError(")
    assert finished.returncode == 2
    assert "Traceback" in finished.stderr
    assert f"line {raising_line}" in finished.stderr
    assert "ValueError: no training data at 'data/train.npz'" in finished.stderr
    assert "Traceback" not in finished.stdout
    if finished.stdout.strip():
        json.loads(finished.stdout)


def test_a_traced_step_that_fails_is_told_by_what_went_wrong(runs: Runs) -> None:
    # TensorFlow's message starts "in user code:", then the frames, then the error itself.
    finished = runs.finished("run", "traced_step_fails")
    line = _line_of(SCRIPTS / "traced_step_fails.py", "tf.reshape(grads[0], [5])")
    (said,) = [text for text in finished.stderr.splitlines() if text.startswith("gradcheck:")]
    assert said.startswith("gradcheck: traced_step_fails.py raised ValueError at "), said
    assert (
        f"traced_step_fails.py:{line} after it asked for gradients: Cannot reshape a tensor "
        "with 3 elements to shape [5]"
    ) in said
    assert "in user code" not in said
    assert finished.returncode == 0 and "every trainable variable gets gradient" in finished.stdout


def test_variables_a_traced_step_creates_are_told_by_their_own_lines(runs: Runs) -> None:
    script = CREATES_IN_STEP
    said = " ".join(runs.finished("run terminal", "step_creates_variables").stdout.split())
    line = _line_of(script, 'name="q")')
    shown = said.replace(f"{script.parent}/", "").replace("tests/public_reports/", "")
    assert f"blocked q shape [] created at {script.name}:{line}" in shown, said
    assert "t.step(x, y)" not in said, said  # the line that called the step


def test_a_model_that_tracks_no_weight_is_told_with_the_variables_it_left_out(runs: Runs) -> None:
    finished = runs.finished("run", "untracked_layers")
    fit = _line_of(SCRIPTS / "untracked_layers.py", "model.fit(")
    said = finished.stderr
    assert finished.returncode == 2, said
    assert "Traceback" not in said
    assert f"model.fit at line {fit} ran on a model that tracks no weight at all" in said
    assert "created 4 trainable variables: " in said
    for name in ("encoder/kernel", "encoder/bias", "head/kernel", "head/bias"):
        assert name in said, said
    assert "not those kept inside another object" in said


def test_a_later_phase_the_step_never_reached_is_told_as_what_is_known(runs: Runs) -> None:
    # The first phase's loop comes around (its step function runs again) before the second
    # phase's request: gradcheck stops there and names that request.
    finished = runs.finished("run", "two_phases")
    assert finished.returncode == 0, finished.stderr[-4000:]
    report = json.loads(finished.stdout)  # one request: one report, not a list
    script = SCRIPTS / "two_phases.py"
    first = _line_of(script, "tape.gradient(loss, classifier")
    later = _line_of(script, "tape.gradient(loss, regressor")
    assert report["source"]["request"]["location"]["line"] == first
    (told,) = [f for f in report["findings"] if f["code"] == "GC207"]
    assert told["severity"] == "info"
    assert told["message"].startswith("2 trainable variables are given to no gradient request")
    assert "value/kernel" in told["message"] and "value/bias" in told["message"]
    assert f"before it reached the gradient request at two_phases.py:{later}" in told["message"]


def test_quiet_says_where_the_hidden_traceback_is(runs: Runs) -> None:
    finished = runs.finished("run -q", "crashes_before_training")
    assert finished.returncode == 2
    assert "Traceback" not in finished.stderr + finished.stdout
    assert "raised ValueError" in finished.stderr
    assert "run without -q to see its traceback" in finished.stderr
    assert "its traceback is above" not in finished.stderr
