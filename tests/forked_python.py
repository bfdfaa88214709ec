"""`python -c CODE ...` / `python -m MODULE ...` for the test oracles, forked from one process
that imported TensorFlow.

Every oracle question runs in a fresh process, so a TF1 script's `disable_v2_behavior()` or a
script's globals never leak into the next question; but a fresh `import tensorflow` costs seconds
of CPU, and the suite asks dozens of questions. gradcheck's own warm launcher
(`gradcheck_cli.loaders.warm_launcher`) imports TensorFlow and Keras once and forks a clean child
per request; this module keeps one launcher per test process and starts the children through it.
A child is a process like `subprocess.Popen` starts: its own session, stdin empty, stdout
discarded, stderr kept, the requested environment and working folder.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from gradcheck_cli.loaders.warm_launcher import MESSAGE_BYTES

ROOT = Path(__file__).resolve().parents[1]
_POLL_SECONDS = 0.05
_START_SECONDS = 300


class ForkedProcess:
    """A forked `python -c`/`-m`, with the part of subprocess.Popen the oracles use."""

    def __init__(self, launcher: _Launcher, pid: int, stderr_path: str) -> None:
        self._launcher = launcher
        self.pid = pid
        self._stderr_path = stderr_path
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._launcher.ask("poll", self.pid)
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
            self.returncode = self._launcher.ask("wait", self.pid)


class _Launcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gradcheck_cli.loaders.warm_launcher", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=ROOT,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._channel.settimeout(_START_SECONDS)
        if self._receive()[0] != "ready":
            raise RuntimeError("the oracle's TensorFlow launcher did not start")
        self._channel.settimeout(None)

    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> ForkedProcess:
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
            pid = self.ask("launch", [sys.executable, *argv], dict(env), cwd, fds=stdio)
        finally:
            for fd in stdio:
                os.close(fd)
        if pid is None:
            raise RuntimeError("the oracle's TensorFlow launcher could not fork")
        return ForkedProcess(self, pid, stderr_path)

    def ask(self, *request: object, fds: Sequence[int] = ()) -> int | None:
        with self._lock:
            socket.send_fds(self._channel, [pickle.dumps(request)], list(fds))
            answer: int | None = self._receive()[1]
        return answer

    def _receive(self) -> tuple[str, int | None]:
        message = self._channel.recv(MESSAGE_BYTES)
        if not message:
            raise RuntimeError("the oracle's TensorFlow launcher ended")
        reply: tuple[str, int | None] = pickle.loads(message)
        return reply

    def close(self) -> None:
        self._channel.close()
        self.process.kill()
        self.process.wait()


_launcher: _Launcher | None = None
_launcher_lock = threading.Lock()


def start(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike[str] = ROOT
) -> ForkedProcess:
    """Start `python *argv` (`-c CODE ...` or `-m MODULE ...`) with `env` in `cwd`, forked from
    the launcher."""
    global _launcher
    with _launcher_lock:
        if _launcher is None:
            _launcher = _Launcher()
            atexit.register(_launcher.close)
        launcher = _launcher
    return launcher.start(argv, env, os.fspath(cwd))


def _run_as_python_c(argv: list[str]) -> None:
    """In the forked child: what `python -c CODE ARGS` would run."""
    code, *args = argv[1:]
    sys.argv = ["-c", *args]
    sys.path[0] = ""  # `python -c` imports from the working folder
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})


if __name__ == "__main__":
    _run_as_python_c(sys.argv)
