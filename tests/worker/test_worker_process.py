"""The worker runs in its own process: its time limit, its failures, its output on our stderr."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from gradcheck_cli.errors import GradcheckError, error_line
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.worker import progress
from gradcheck_cli.worker.process import (
    _Relay,
    _relay_for,
    _start_relay,
    _without_tensorflow_start_up_noise,
    run_worker,
)
from gradcheck_cli.worker.progress import Status
from gradcheck_cli.worker.protocol import Job, WorkerRequest

ENDLESS = Path(__file__).parents[1] / "scripts" / "bad" / "endless.py"


def test_tensorflow_start_up_lines_are_dropped_and_the_user_s_prints_kept() -> None:
    text = (
        "W0000 00:00:1700000000.000000   12345 cuda_executor.cc:1228] no GPU\n"
        "I0000 00:00:1700000000.000000   12345 cpu_feature_guard.cc:210] AVX2 FMA\n"
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
        "TensorFlow with the appropriate compiler flags.\n"
        "the user's script prints this\n"
    )
    assert _without_tensorflow_start_up_noise(text) == "the user's script prints this\n"


def test_the_environment_sets_the_time_limit_when_the_options_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GRADCHECK_TIMEOUT", "2")
    with pytest.raises(GradcheckError, match="did not finish within 2 s"):
        run_worker(WorkerRequest(Job.SCRIPT, ENDLESS, CheckOptions(loss="loss")))


def test_the_options_time_limit_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADCHECK_TIMEOUT", "600")
    with pytest.raises(GradcheckError, match="did not finish within 2 s"):
        run_worker(WorkerRequest(Job.SCRIPT, ENDLESS, CheckOptions(loss="loss", timeout=2)))


@pytest.mark.parametrize("value", ["abc", "inf", "nan", "1e308", "0", "-1"])
def test_a_time_limit_that_is_not_one_is_refused_before_the_worker_starts(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("GRADCHECK_TIMEOUT", value)
    with pytest.raises(GradcheckError, match="^GRADCHECK_TIMEOUT: a timeout is a number"):
        run_worker(WorkerRequest(Job.SCRIPT, ENDLESS, CheckOptions(loss="loss")))
    monkeypatch.delenv("GRADCHECK_TIMEOUT")
    with pytest.raises(GradcheckError, match="^timeout: a timeout is a number"):
        run_worker(
            WorkerRequest(
                Job.SCRIPT,
                ENDLESS,
                CheckOptions(loss="loss", timeout=float(value) if value != "abc" else -1.0),
            )
        )


def test_a_failure_in_the_worker_is_a_gradcheck_error(tmp_path: Path) -> None:
    missing = tmp_path / "model.keras"
    with pytest.raises(GradcheckError) as raised:
        run_worker(WorkerRequest(Job.KERAS_FILE, missing, CheckOptions()))
    # The path as error lines show it: whole, or shortened when a deep tmp folder makes it long.
    assert str(raised.value).startswith(f"{error_line(str(missing))} cannot be loaded by Keras: ")


def test_the_relay_filters_whole_lines_however_the_pipe_cuts_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    noise = b"I0000 00:00:1700000000.000000   12345 cpu_feature_guard.cc:210] AVX2 FMA\n"
    # A start-up line cut in two, then a UTF-8 character cut in two ("\xc3\xa9" is "é").
    pieces = [noise[:20], noise[20:] + b"kept, caf\xc3", b"\xa9\nno newline at the end"]
    read, write = os.pipe()
    relay = _start_relay(os.fdopen(read, "rb"), _Relay())
    for piece in pieces:
        os.write(write, piece)
        time.sleep(0.05)
    os.close(write)
    relay.join(5)
    assert capsys.readouterr().err == "kept, caf\u00e9\nno newline at the end"


SCRIPT_OUTPUT = (
    "epoch 1\n\ngradcheck: train.py: a note from gradcheck\nTraceback (most recent call last):\n"
)


def test_each_line_the_user_s_script_prints_is_labelled_with_its_file_name() -> None:
    for job in (Job.RUN, Job.SCRIPT):
        relay = _relay_for(WorkerRequest(job, Path("/work/train.py"), CheckOptions()))
        assert relay.shown(SCRIPT_OUTPUT) == (
            "train.py: epoch 1\n"
            "train.py:\n"
            "gradcheck: train.py: a note from gradcheck\n"
            "train.py: Traceback (most recent call last):\n"
        )
    # A model file's loader prints nothing of the user's: nothing to label.
    keras = _relay_for(WorkerRequest(Job.KERAS_FILE, Path("/work/m.keras"), CheckOptions()))
    assert keras.shown(SCRIPT_OUTPUT) == SCRIPT_OUTPUT


def test_an_overlong_line_is_labelled_once() -> None:
    relay = _Relay(label="train.py")
    assert relay.shown("x" * 10) == "train.py: " + "x" * 10
    assert relay.shown("y" * 10 + "\nnext\n", continued=True) == "y" * 10 + "\ntrain.py: next\n"


def test_quiet_leaves_out_the_script_s_output_unless_debugging() -> None:
    request = WorkerRequest(Job.RUN, Path("train.py"), CheckOptions(quiet=True))
    assert (
        _relay_for(request).shown(SCRIPT_OUTPUT) == "gradcheck: train.py: a note from gradcheck\n"
    )
    assert _Relay(label="train.py", quiet=True).shown("rest\n", continued=True) == ""
    debugging = WorkerRequest(Job.RUN, Path("train.py"), CheckOptions(quiet=True, debug=True))
    assert _relay_for(debugging).shown(SCRIPT_OUTPUT).startswith("train.py: epoch 1\n")


def test_the_status_shows_the_worker_s_steps_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    monkeypatch.setenv("TERM", "xterm")  # rich draws no live status on a dumb terminal
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    status = Status(True, "importing train.py with TensorFlow...", tmp_path, console)
    # The worker learns where to say its steps from its environment.
    for name, value in status.environment().items():
        monkeypatch.setenv(name, value)
    with status:
        time.sleep(0.3)  # the spinner's own refresh draws the first step
        progress.say("tracing loss...")
        status.poll()
    shown = screen.getvalue()
    assert "importing train.py with TensorFlow..." in shown
    assert "tracing loss..." in shown


def test_no_status_where_stderr_is_not_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    monkeypatch.setenv("FORCE_COLOR", "1")  # colour, yes; a spinner in a CI log, no
    status = Status(True, "importing train.py with TensorFlow...", tmp_path)
    assert not status.enabled and status.environment() == {}
    with status:
        status.poll()
    assert capsys.readouterr().err == ""
    monkeypatch.delenv(progress.PROGRESS_FILE_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    progress.say("tracing loss...")  # nobody listens: nothing is written anywhere
    assert list(tmp_path.iterdir()) == []
    terminal = Console(file=io.StringIO(), force_terminal=True)
    assert not Status(False, "importing...", tmp_path, terminal).enabled  # the options say no


def test_a_crafted_script_name_labels_its_lines_escaped() -> None:
    # A file name that sets the terminal's title and reorders the line if printed raw.
    name = "train\x1b]0;pwned\x07\u202e.py"
    relay = _relay_for(WorkerRequest(Job.RUN, Path("/project") / name, CheckOptions()))
    shown = relay.shown("epoch 1\n")
    assert shown == "train\\x1b]0;pwned\\x07\\u202e.py: epoch 1\n"
