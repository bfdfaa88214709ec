"""`gradcheck run` findings of its own: requests judged on their own variable lists, variables no
request trains (GC207), frozen ones handed to a request (GC208), --continue, the Python API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck_cli import check_script_run
from gradcheck_cli.cli import run_command
from tests.cli_runs import Ran, invoke

Checked = tuple[dict, int, Path]  # the JSON report, the exit code, the marker file
SCRIPTS = Path(__file__).parent / "scripts" / "run_findings"


def _run(script: Path, *flags: str, marker: Path) -> Ran:
    """`gradcheck run SCRIPT FLAGS` in this process (its workers fork warm), the script writing
    `marker` once it takes a training step."""
    return invoke(run_command, [script, *flags], env={"GRADCHECK_TEST_MARKER": str(marker)})


@pytest.fixture(scope="module")
def student_teacher(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    marker = tmp_path_factory.mktemp("student") / "trained.marker"
    result = _run(SCRIPTS / "student_teacher.py", "-f", "json", "--verify", marker=marker)
    return json.loads(result.stdout), result.returncode, marker


def test_a_request_is_judged_on_its_own_variables(student_teacher: Checked) -> None:
    report, code, marker = student_teacher
    statuses = {v["name"]: v["status"] for v in report["variables"]}
    # The teacher is never handed to the optimizer: not judged, and not an error.
    assert statuses == {"student/w": "ok", "student/b": "ok", "steps": "frozen"}
    assert report["source"]["kind"] == "run"
    assert report["source"]["request"]["api"] == "GradientTape.gradient"
    assert report["source"]["request"]["location"]["line"] == 32
    assert code == 0
    assert not marker.exists()  # stopped before the optimizer step


def test_tensorflow_agrees_on_the_request(student_teacher: Checked) -> None:
    codes = [f["code"] for f in student_teacher[0]["findings"]]
    assert "GC003" in codes and "GC002" not in codes


def test_untrained_variables_are_an_info_and_frozen_ones_a_warning(
    student_teacher: Checked,
) -> None:
    findings = {f["code"]: f for f in student_teacher[0]["findings"]}
    # The run stops at the first weight change: a later step might train the teacher, so
    # what is known is told, as an info.
    assert "teacher/w, teacher/b" in findings["GC207"]["message"]
    assert "of the step checked" in findings["GC207"]["message"]
    assert findings["GC207"]["severity"] == "info"
    assert findings["GC208"]["severity"] == "warning"
    assert "steps" in findings["GC208"]["message"]
    # The teacher's stop_gradient does stop a trainable variable: no "has no effect" warning.
    assert "GC203" not in findings


def test_continue_reports_then_lets_the_script_train(tmp_path: Path) -> None:
    marker = tmp_path / "trained.marker"
    result = _run(SCRIPTS / "manual_update.py", "--continue", "-q", "--", "2", marker=marker)
    assert result.returncode == 1, result.stderr
    (line,) = result.stdout.splitlines()  # -q: one line, naming the script and its request
    script = os.path.relpath(SCRIPTS / "manual_update.py")
    lines = (SCRIPTS / "manual_update.py").read_text().splitlines()
    request = next(number for number, text in enumerate(lines, 1) if "tape.gradient(" in text)
    assert line == (
        f"{script}:{request}: GradientTape.gradient: "
        "1 of 2 trainable variables is dead (1 ok, 1 blocked, 0 unused, 0 frozen)"
        # w2 goes through NumPy: the step has no graph, TensorFlow's own verdict stands.
        "; eager step: TensorFlow's verdict only, no graph"
    )
    assert "step 0 done" not in result.stderr  # -q leaves out what the script prints
    assert marker.read_text() == "1"  # the script's own argument: two steps, 0 and 1


def test_the_python_api_runs_a_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "trained.marker"
    monkeypatch.setenv("GRADCHECK_TEST_MARKER", str(marker))
    (report,) = check_script_run(SCRIPTS / "manual_update.py", ["5"], timeout=300, verify=True)
    statuses = {v.name: v.status.value for v in report.variables}
    assert statuses == {"w1": "ok", "w2": "blocked"}
    # TensorFlow's own tape, asked by the script itself, gives w2 no gradient too.
    assert report.verification is not None and report.verification.agrees
    (blocker,) = report.variables[1].blockers
    assert blocker.location is not None and blocker.location.line == 16  # the .numpy() line
    assert not marker.exists()


@pytest.mark.parametrize(
    ("target", "message"),
    [("missing.py", "no such file"), ("README.md", "neither a Python script")],
)
def test_run_refuses_what_is_not_a_script(target: str, message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", "run", target],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent.parent,
    )
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_notebook_runs_cell_by_cell(tmp_path: Path) -> None:
    marker = tmp_path / "trained.marker"
    notebook = Path(__file__).parent / "scripts" / "run" / "notebook_train.ipynb"
    result = _run(notebook, "-f", "json", "--verify", marker=marker)
    report = json.loads(result.stdout)
    dead = {v["name"] for v in report["variables"] if v["status"] not in ("ok", "frozen")}
    assert dead == {"dense/kernel", "dense/bias"}  # the layer built in cell 3, never called
    codes = [f["code"] for f in report["findings"]]
    assert "GC003" in codes and "GC002" not in codes  # TensorFlow's own gradients agree
    unused = next(f for f in report["findings"] if f["code"] == "GC108")
    assert unused["location"]["file"].endswith("notebook_train.ipynb#cell3")
    assert "skipped the line magic `%pip install tensorflow`" in result.stderr
    assert result.returncode == 1
    assert not marker.exists()
