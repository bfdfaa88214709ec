"""On a terminal, gradcheck's stderr shows what it is doing while TensorFlow works, and labels
what the user's script prints; elsewhere it shows no status at all."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "noisy_tf2.py"
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_a_terminal(arguments: list[str]) -> tuple[int, str]:
    """Run gradcheck with its stderr on a pseudo-terminal; its exit code and what it showed."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck_cli", *arguments],
        cwd=REPO,
        # A terminal that can draw (a CI runner may say TERM=dumb, or nothing).
        env={**env, "TERM": "xterm", "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every process holding the terminal is gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return process.wait(timeout=300), shown.decode("utf-8", "replace")


@pytest.mark.heavy
def test_a_terminal_sees_each_step_and_the_script_s_labelled_output(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    args = [str(SCRIPT), "--loss", "loss", "-f", "json", "-o", str(report), "--no-cache"]
    code, shown = _on_a_terminal(args)  # --no-cache: another test may have traced it already
    assert code != 2, shown  # checked; the verdict itself is test_cli's, judged by TensorFlow
    text = _CONTROL.sub("", shown)
    assert "importing noisy_tf2.py with TensorFlow..." in text
    assert "tracing loss..." in text
    assert "noisy_tf2.py: the user's script prints this" in text
    assert "noisy_tf2.py: and this to stderr" in text
    assert report.read_text().startswith("{")


@pytest.mark.heavy
def test_quiet_shows_neither_the_status_nor_the_script_s_output(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    quiet = [str(SCRIPT), "--loss", "loss", "-q", "-f", "json", "-o", str(report)]
    code, shown = _on_a_terminal(quiet)
    assert code != 2 and report.read_text().startswith("{")
    assert _CONTROL.sub("", shown).strip() == ""
