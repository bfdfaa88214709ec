"""`python -c CODE ...` / `python -m MODULE ...` for the test oracles, forked from one process
that imported TensorFlow.

Every oracle question runs in a fresh process, so a TF1 script's `disable_v2_behavior()` or a
script's globals never leak into the next question; but a fresh `import tensorflow` costs seconds
of CPU, and the suite asks dozens of questions. gradcheck's own warm launcher
(`gradcheck_cli.jobs.warm_launcher`, through its client `warm_workers.Launcher`) imports
TensorFlow and Keras once and forks a clean child per request; this module keeps one launcher
per test process and starts the children through it.
A child is a process like `subprocess.Popen` starts: its own session, stdin empty, stdout
discarded, stderr kept, the requested environment and working folder.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from gradcheck_cli.worker.warm_workers import Launcher

ROOT = Path(__file__).resolve().parents[1]
_POLL_SECONDS = 0.05
_START_SECONDS = 300.0


class ForkedProcess:
    """A forked `python -c`/`-m`, with the part of subprocess.Popen the oracles use."""

    def __init__(self, pid: int, stderr_path: str) -> None:
        self.pid = pid
        self._stderr_path = stderr_path
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = _reap(self.pid, block=False)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[None, str]:
        """Wait for the end (TimeoutExpired after `timeout` s, as Popen); its stderr."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["python", "-c"], timeout or 0.0)
            time.sleep(_POLL_SECONDS)
        stderr = Path(self._stderr_path).read_text(errors="replace")
        Path(self._stderr_path).unlink(missing_ok=True)
        return None, stderr

    def kill(self) -> None:
        """Kill the process and its group, and reap it."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self.returncode = _reap(self.pid, block=True)


# gradcheck's launcher client, shared by the oracles' threads, which take turns to talk to it.
_launcher: Launcher | None = None
_lock = threading.Lock()


def _the_launcher() -> Launcher:
    global _launcher
    if _launcher is None:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
        # The launcher starts with `python -P` (its working folder is not on sys.path): the
        # tests package is found through PYTHONPATH, as a repository's modules never are.
        paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        _launcher = Launcher(env, str(ROOT))
        atexit.register(_launcher.close)
    return _launcher


def _reap(pid: int, block: bool) -> int | None:
    with _lock:
        return _the_launcher().reap(pid, block)


def start(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike[str] = ROOT
) -> ForkedProcess:
    """Start `python *argv` (`-c CODE ...` or `-m MODULE ...`) with `env` in `cwd`, forked from
    the launcher."""
    with tempfile.NamedTemporaryFile("wb", prefix="oracle-stderr-", delete=False) as err:
        stderr_path = err.name
    stdio = [
        os.open(os.devnull, os.O_RDONLY),
        os.open(os.devnull, os.O_WRONLY),
        os.open(stderr_path, os.O_WRONLY),
    ]
    if argv[0] == "-c":  # the launcher runs modules: this one runs the code
        argv = ["-m", "tests.forked_python", *argv[1:]]
    try:
        with _lock:
            pid = _the_launcher().start(
                [sys.executable, *argv], env, os.fspath(cwd), stdio, _START_SECONDS
            )
    finally:
        for fd in stdio:
            os.close(fd)
    if pid is None:
        raise RuntimeError("the oracles' TensorFlow launcher could not fork")
    return ForkedProcess(pid, stderr_path)


def run(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] = ROOT,
    timeout: float = _START_SECONDS,
    check: bool = True,
) -> tuple[int, str]:
    """Run `python *argv` forked (`start`) to its end, killed if it outlasts `timeout`: its exit
    code and stderr. With `check`, a non-zero exit raises, with the end of its stderr."""
    process = start(argv, os.environ if env is None else env, cwd)
    try:
        _, stderr = process.communicate(timeout=timeout)
    finally:
        process.kill()
    assert process.returncode is not None
    if check and process.returncode != 0:
        raise RuntimeError(
            f"python {' '.join(argv[:2])[:80]} exited {process.returncode}:\n{stderr[-4000:]}"
        )
    return process.returncode, stderr


def _run_as_python_c(argv: list[str]) -> None:
    """In the forked child: what `python -c CODE ARGS` would run."""
    code, *args = argv[1:]
    sys.argv = ["-c", *args]
    sys.path[0] = ""  # `python -c` imports from the working folder
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})


if __name__ == "__main__":
    _run_as_python_c(sys.argv)
