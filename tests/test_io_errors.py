"""Files and streams that fail: exit 2 with one line on stderr, never a traceback or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gradcheck_cli.cli import ExitCode, command
from tests.cli_runs import Ran, invoke

# Enough for a SavedModel check in a fresh interpreter on a busy machine; a hang fails instead.
SUBPROCESS_SECONDS = 120
LINUX_DEVICES = pytest.mark.skipif(
    not Path("/dev/full").exists(), reason="needs /dev/full and /dev/zero"
)


def _run(*args: str | Path) -> Ran:
    return invoke(command, args)


def _gradcheck(*args: str | Path, **how: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", *map(str, args)],
        text=True,
        check=False,
        timeout=SUBPROCESS_SECONDS,
        **how,  # type: ignore[call-overload]
    )


def _one_error(err: str) -> str:
    """The one line of stderr, which must be gradcheck's error line."""
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradcheck: error: "), err
    return lines[0]


# --- -o and --write-baseline: checked before any model is ---------------------------------------


@pytest.mark.parametrize("flag", ["-o", "--write-baseline"])
@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("missing/out.json", "no such file or directory"),
        ("file.txt/out.json", "not a directory"),  # unwritable even for root, unlike chmod
        ("folder", "is a directory"),
    ],
)
def test_an_unwritable_output_is_one_line_before_any_check(
    tmp_path: Path, flag: str, target: str, reason: str
) -> None:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    path = tmp_path / target
    # A model that does not exist: had the check run, its own error line would follow.
    code, out, err = _run(tmp_path / "model.py", flag, path)
    assert (code, out) == (ExitCode.ERROR, "")
    assert _one_error(err) == f"gradcheck: error: cannot write {path}: {reason}"


def test_the_output_check_neither_creates_nor_truncates_the_file(tmp_path: Path) -> None:
    new, kept = tmp_path / "new.json", tmp_path / "kept.json"
    kept.write_text("yesterday's report")
    for target in (new, kept):
        code, _, err = _run(tmp_path / "missing.py", "-o", target)
        assert code == ExitCode.ERROR and "cannot write" not in err
    assert not new.exists()
    assert kept.read_text() == "yesterday's report"


@LINUX_DEVICES
@pytest.mark.parametrize("flag", ["-o", "--write-baseline"])
def test_a_device_at_an_output_path_is_one_line(saved: Path, flag: str) -> None:
    # A device (or a FIFO) is refused before anything is checked: no write blocks on it.
    code, out, err = _run(saved, "--loss", "loss", flag, "/dev/full")
    assert (code, out) == (ExitCode.ERROR, "")
    assert _one_error(err) == (
        "gradcheck: error: cannot write /dev/full: it is not a regular file (a FIFO, a socket "
        "or a device); gradcheck writes files"
    )


# --- stdout: a full device is an error line, a reader that stops is quiet ------------------------


@LINUX_DEVICES
def test_stdout_on_a_full_device_is_one_line(saved: Path) -> None:
    with open("/dev/full", "w") as full:
        result = _gradcheck(saved, "--loss", "loss", stdout=full, stderr=subprocess.PIPE)
    assert result.returncode == ExitCode.ERROR
    assert _one_error(result.stderr) == (
        "gradcheck: error: cannot write to stdout: no space left on device"
    )


@pytest.mark.parametrize("arguments", [["{saved}", "--loss", "loss"], ["--explain", "all"]])
def test_a_closed_pipe_on_stdout_ends_quietly_with_2(
    saved: Path,
    arguments: list[str],
) -> None:
    # `gradcheck ... | head -c1`: the reader is gone before the report is written.
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck_cli", *(a.format(saved=saved) for a in arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()
    try:
        _, err = process.communicate(timeout=SUBPROCESS_SECONDS)
    finally:
        process.kill()
    assert process.returncode == ExitCode.ERROR
    assert err == ""


# --- files gradcheck reads: regular, bounded, UTF-8 ----------------------------------------------


def _not_utf8(folder: Path) -> Path:
    path = folder / "latin1.toml"
    path.write_bytes('loss = "caf\u00e9"\n'.encode("latin-1"))
    return path


def _larger_than(folder: Path, limit: int) -> Path:
    path = folder / "huge"
    path.write_bytes(b"")
    os.truncate(path, limit + 1)  # sparse: no disk used
    return path


def _fifo(folder: Path) -> Path:
    path = folder / "fifo.toml"
    os.mkfifo(path)
    return path


def _dev_zero(_folder: Path) -> Path:
    return Path("/dev/zero")


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(_not_utf8, "not UTF-8 text", id="not-utf8"),
        pytest.param(lambda f: _larger_than(f, 1 << 20), "larger than 1 MiB", id="huge"),
        pytest.param(lambda f: f, "not a regular file", id="directory"),
        pytest.param(lambda f: f / "no.toml", "no such file or directory", id="missing"),
        pytest.param(_dev_zero, "not a regular file", id="dev-zero", marks=LINUX_DEVICES),
    ],
)
def test_a_config_file_that_cannot_be_read_is_one_line(
    tmp_path: Path, make: Callable[[Path], Path], reason: str
) -> None:
    path = make(tmp_path)
    code, out, err = _run(tmp_path / "model.py", "--config", path)
    assert (code, out) == (ExitCode.ERROR, "")
    assert _one_error(err) == f"gradcheck: error: {path}: cannot read the config file: {reason}"


def test_a_fifo_config_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = _fifo(tmp_path)
    result = _gradcheck(tmp_path / "model.py", "--config", path, capture_output=True)
    assert result.returncode == ExitCode.ERROR
    assert _one_error(result.stderr) == (
        f"gradcheck: error: {path}: cannot read the config file: not a regular file"
    )


def test_a_discovered_pyproject_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(b"[tool.gradcheck]\nloss = '\xff'\n")
    result = _gradcheck("model.py", cwd=tmp_path, capture_output=True)
    assert result.returncode == ExitCode.ERROR
    assert _one_error(result.stderr) == (
        f"gradcheck: error: {path}: cannot read the config file: not UTF-8 text"
    )


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(_dev_zero, "not a regular file", id="dev-zero", marks=LINUX_DEVICES),
        pytest.param(lambda f: _larger_than(f, 16 << 20), "larger than 16 MiB", id="huge"),
        pytest.param(_not_utf8, "not UTF-8 text", id="not-utf8"),
    ],
)
def test_a_baseline_that_cannot_be_read_is_one_line(
    saved: Path,
    tmp_path: Path,
    make: Callable[[Path], Path],
    reason: str,
) -> None:
    path = make(tmp_path)
    code, out, err = _run(saved, "--loss", "loss", "--baseline", path)
    assert (code, out) == (ExitCode.ERROR, "")
    assert _one_error(err) == f"gradcheck: error: {path}: cannot read the baseline: {reason}"


@LINUX_DEVICES
def test_a_baseline_named_by_the_config_is_bounded_too(
    saved: Path,
    tmp_path: Path,
) -> None:
    config = tmp_path / "gradcheck.toml"
    config.write_text('baseline = "/dev/zero"\n')
    code, _, err = _run(saved, "--loss", "loss", "--config", config)
    assert code == ExitCode.ERROR
    assert _one_error(err).endswith("/dev/zero: cannot read the baseline: not a regular file")
