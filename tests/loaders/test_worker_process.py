"""The worker runs in its own process: its time limit, its failures, its output on our stderr."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.loaders.worker_process import (
    _relay,
    _without_tensorflow_start_up_noise,
    run_worker,
)
from gradcheck_cli.loaders.worker_protocol import Job, WorkerRequest
from gradcheck_cli.options import CheckOptions

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
    with pytest.raises(GradcheckError, match=f"^{missing} cannot be loaded by Keras: "):
        run_worker(WorkerRequest(Job.KERAS_FILE, missing, CheckOptions()))


def test_the_relay_filters_whole_lines_however_the_pipe_cuts_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    noise = b"I0000 00:00:1700000000.000000   12345 cpu_feature_guard.cc:210] AVX2 FMA\n"
    # A start-up line cut in two, then a UTF-8 character cut in two ("\xc3\xa9" is "é").
    pieces = [noise[:20], noise[20:] + b"kept, caf\xc3", b"\xa9\nno newline at the end"]
    read, write = os.pipe()
    relay = _relay(os.fdopen(read, "rb"), debug=False)
    for piece in pieces:
        os.write(write, piece)
        time.sleep(0.05)
    os.close(write)
    relay.join(5)
    assert capsys.readouterr().err == "kept, caf\u00e9\nno newline at the end"
