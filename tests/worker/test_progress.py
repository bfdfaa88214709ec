"""A SavedModel check shows its steps on stderr as it goes: a status line on a terminal, a plain
line every few seconds in a log; never on stdout, never with -q."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from benchmarks import synthetic
from gradcheck_cli.cli import command
from tests.cli_runs import invoke

REPO = Path(__file__).resolve().parents[2]
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The steps of a check, in the order it takes them.
STEPS = ("reading saved_model.pb", "building the graph model", "analysing", "building the findings")
# A plain line in a log: the step, how far it is, how long the check has taken.
LOG_LINE = re.compile(
    r"gradcheck: (reading saved_model\.pb|building the graph model \([\d,]+ functions?, [\d,]+ "
    r"nodes\)|analysing: [a-z' ]+( \([\d,]+ of [\d,]+\))?|building the findings"
    r"|asking TensorFlow for its own gradients \(--verify\))\.\.\. \(\d+ s\)"
)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """SavedModels whose loss calls functions: about a thousand (20k ops), a second or so to
    check, long enough for several lines at a short interval; and a few (50 ops), for TensorFlow
    to load in seconds. TensorFlow writes their template in a process of its own."""
    root = tmp_path_factory.mktemp("calls")
    return {
        size: synthetic.write(synthetic.Shape.CALLS, ops, root / size, root / "cache").parent
        for size, ops in (("large", 20_000), ("small", 50))
    }


@pytest.fixture(scope="module")
def model(models: dict[str, Path]) -> Path:
    return models["large"]


def _environment(**extra: str) -> dict[str, str]:
    # The terminal's own size, not the COLUMNS and LINES of the shell that runs the tests.
    dropped = ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.pop("GRADCHECK_PROGRESS_SECONDS", None)
    return {**env, "PYTHONPATH": str(REPO), **extra}


def _statuses(report: str) -> dict[str, str]:
    """The report's verdicts, to compare with the generator's (synthetic.EXPECTED, which
    TensorFlow's gradients confirm in tests/test_benchmark_synthetic.py)."""
    return {v["name"]: v["status"] for v in json.loads(report)["variables"]}


def _on_a_terminal(model: Path, tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    """gradcheck on an 80-column terminal, its stdout (the JSON report) sent to a file: its
    exit code, what the terminal showed (control sequences taken out), the report."""
    report = tmp_path / "report.json"
    arguments = [sys.executable, "-m", "gradcheck_cli", str(model), "--loss", "loss", "-f", "json"]
    line = f"exec {shlex.join([*arguments, *flags])} > {shlex.quote(str(report))}"
    terminal = pexpect.spawn(
        "/bin/sh",
        ["-c", line],
        cwd=REPO,
        env=_environment(TERM="xterm"),  # a terminal that can draw
        dimensions=(24, 80),
        encoding="utf-8",
        timeout=120,
    )
    terminal.expect(pexpect.EOF)
    terminal.close()
    assert terminal.exitstatus is not None, terminal.signalstatus
    return terminal.exitstatus, _CONTROL.sub("", terminal.before), report.read_text()


@pytest.mark.heavy
def test_a_terminal_sees_every_step_and_stdout_stays_the_report(
    model: Path, tmp_path: Path
) -> None:
    code, shown, report = _on_a_terminal(model, tmp_path)
    assert code == 1, shown  # dead variables
    assert _statuses(report) == synthetic.EXPECTED
    where = [shown.find(step) for step in STEPS]
    assert -1 not in where and where == sorted(where), shown
    assert re.search(r"building the graph model \([\d,]+ functions, [\d,]+ nodes\)", shown)
    assert "gradcheck:" not in report and "building" not in report


@pytest.mark.heavy
def test_quiet_shows_no_step_on_a_terminal(model: Path, tmp_path: Path) -> None:
    code, shown, report = _on_a_terminal(model, tmp_path, "-q")
    assert code == 1 and _statuses(report) == synthetic.EXPECTED
    assert shown.strip() == ""


def _piped(model: Path, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", str(model), "--loss", "loss", "-f", "json", *flags],
        cwd=REPO,
        env=_environment(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.heavy
def test_a_log_gets_a_plain_line_every_interval(model: Path) -> None:
    # FORCE_COLOR, as CI runners set it, still gets plain lines: a log is no terminal.
    done = _piped(model, GRADCHECK_PROGRESS_SECONDS="0.05", FORCE_COLOR="1")
    assert done.returncode == 1, done.stderr
    assert _statuses(done.stdout) == synthetic.EXPECTED  # stdout: the report alone
    lines = done.stderr.splitlines()
    assert len(lines) >= 3, done.stderr
    assert not [line for line in lines if not LOG_LINE.fullmatch(line)], done.stderr
    assert "\x1b" not in done.stderr  # no spinner, no colour: a log reads it as text
    building = [line for line in lines if "building the graph model" in line]
    assert building, done.stderr
    # The counts grow as the model is built.
    functions = [
        int(re.search(r"\(([\d,]+) functions?", line)[1].replace(",", "")) for line in building
    ]
    assert functions == sorted(functions)
    # Each step is told after the one before it.
    order = [next(i for i, step in enumerate(STEPS) if step in line) for line in lines]
    assert order == sorted(order), done.stderr


@pytest.mark.heavy
def test_a_check_quicker_than_the_interval_or_quiet_prints_no_line(model: Path) -> None:
    quick = _piped(model, GRADCHECK_PROGRESS_SECONDS="600")
    assert quick.returncode == 1 and quick.stderr == ""
    quiet = _piped(model, "-q", GRADCHECK_PROGRESS_SECONDS="0.05")
    assert quiet.returncode == 1 and quiet.stderr == ""
    assert _statuses(quiet.stdout) == synthetic.EXPECTED


def test_a_bad_interval_is_one_line_and_exit_2(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for bad in ("soon", "0", "-1", "nan"):
        monkeypatch.setenv("GRADCHECK_PROGRESS_SECONDS", bad)
        code, out, err = invoke(command, [str(model), "--loss", "loss", "-f", "json"])
        assert code == 2
        assert err.count("\n") == 1 and "GRADCHECK_PROGRESS_SECONDS" in err, err
        assert json.loads(out)["error"]  # the JSON document is still written


@pytest.mark.heavy
def test_a_log_hears_of_tensorflow_s_own_check_while_it_runs(models: dict[str, Path]) -> None:
    done = _piped(models["small"], "--verify", GRADCHECK_PROGRESS_SECONDS="0.2")
    assert done.returncode == 1, done.stderr
    assert _statuses(done.stdout) == synthetic.EXPECTED
    lines = done.stderr.splitlines()
    assert not [line for line in lines if not LOG_LINE.fullmatch(line)], done.stderr
    # TensorFlow's import alone takes seconds: the log hears of it meanwhile.
    assert any("asking TensorFlow for its own gradients" in line for line in lines), done.stderr


@pytest.mark.heavy
def test_a_terminal_hands_the_status_to_the_worker_and_takes_it_back(
    models: dict[str, Path], tmp_path: Path
) -> None:
    code, shown, report = _on_a_terminal(models["small"], tmp_path, "--verify")
    assert code == 1 and _statuses(report) == synthetic.EXPECTED, shown
    worker_s = shown.find("asking TensorFlow for the gradients of small...")
    assert -1 < shown.find("analysing") < worker_s < shown.rfind("building the findings"), shown
