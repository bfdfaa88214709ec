"""Start a worker process: plainly, or forked from a warm launcher when one can serve it exactly.

Each worker pays TensorFlow's import (seconds of CPU). The first worker of a gradcheck process is
a plain subprocess; the second one with the same interpreter, working folder and environment
(apart from gradcheck's own variables and the others that TensorFlow's import does not read)
starts a launcher (warm_launcher.py) that imports TensorFlow once and forks the later ones.
GRADCHECK_WARM_WORKERS=never turns this off, =always uses a launcher from the first worker on.
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
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import IO

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.worker.process_tree import MARK_VARIABLE, ProcessTree
from gradcheck_cli.worker.protocol import MESSAGE_BYTES

WARM_VARIABLE = "GRADCHECK_WARM_WORKERS"
# The keys of a worker's environment that TensorFlow's import does not read, so a launcher passes
# them at each launch instead of needing its own: gradcheck's own variables (the process tree's
# mark and the progress file change at every launch; the time limit and any other GRADCHECK_*
# setting are read by gradcheck, or by the user's script once it runs) and the test that pytest
# is running (it rewrites it at each step of each test, and the pytest plugin checks models from
# tests). Any other difference needs another launcher: TensorFlow reads its environment at import.
OWN_PREFIX = "GRADCHECK_"
PER_LAUNCH = frozenset({"PYTEST_CURRENT_TEST"})


def per_launch(name: str) -> bool:
    """Whether the environment variable `name` may differ between workers of one launcher."""
    return name.startswith(OWN_PREFIX) or name in PER_LAUNCH


# Each launcher holds an imported TensorFlow (about 400 MB).
_MOST_LAUNCHERS = 3

_Key = tuple[str, str, str, frozenset[tuple[str, str]]]


class WarmWorker:
    """A worker forked by a launcher, handled like subprocess.Popen: its pid, its pipes, and its
    exit status, which the launcher reports once asked to reap it."""

    def __init__(self, launcher: Launcher, pid: int, stdout: IO[bytes], stderr: IO[bytes]):
        self.launcher = launcher
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reap(block=False)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._reap(block=True)
        assert self.returncode is not None
        return self.returncode

    def _reap(self, block: bool) -> None:
        try:
            self.returncode = self.launcher.reap(self.pid, block)
        except OSError:
            # The launcher died: its orphans went to init, which reaps them; the status is lost.
            self.returncode = -signal.SIGKILL
        if self.returncode is not None:
            self.launcher.busy = False


class Launcher:
    """One warm launcher process and the socket to it. One exchange at a time: callers in several
    threads take turns (gradcheck's own workers take turns through `busy`)."""

    def __init__(self, env: Mapping[str, str], cwd: str) -> None:
        self.mark = uuid.uuid4().hex
        env = dict(env)
        # Every child's /proc/PID/environ is the launcher's: this mark finds the ones that leave
        # their process group (ProcessTree.include).
        env[MARK_VARIABLE] = " ".join(filter(None, (env.get(MARK_VARIABLE, ""), self.mark)))
        self.channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "gradcheck_cli.jobs.warm_launcher",
                    str(theirs.fileno()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        self.ready = False
        self.busy = False

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        stdio: Sequence[int],
        timeout: float,
    ) -> int | None:
        """Fork a worker with `stdio` as its fds 0, 1 and 2; its pid. Waits (up to `timeout`)
        for the launcher's TensorFlow import the first time."""
        if not self.ready:
            self.channel.settimeout(timeout)
            reply = self._receive()
            self.channel.settimeout(None)
            self.ready = reply[0] == "ready"
            if not self.ready:
                raise OSError("the launcher did not start")
        return self._ask(("launch", list(argv), dict(env), cwd), stdio)

    def reap(self, pid: int, block: bool) -> int | None:
        return self._ask(("wait" if block else "poll", pid))

    def _ask(self, request: tuple[object, ...], fds: Sequence[int] = ()) -> int | None:
        try:
            socket.send_fds(self.channel, [pickle.dumps(request)], list(fds))
            reply = self._receive()
        except BaseException:
            # A stop signal may leave the answer unread: no later answer could be trusted.
            self.channel.close()
            raise
        answer: int | None = reply[1]
        return answer

    def _receive(self) -> tuple[str, int | None]:
        message = self.channel.recv(MESSAGE_BYTES)
        if not message:
            raise OSError("the launcher ended")
        reply: tuple[str, int | None] = pickle.loads(message)
        return reply

    def alive(self) -> bool:
        return self.channel.fileno() != -1 and self.process.poll() is None

    def close(self) -> None:
        """End the launcher (its children are the process trees' to end)."""
        self.channel.close()
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()


_lock = threading.Lock()
_launchers: OrderedDict[_Key, Launcher] = OrderedDict()
_launches: dict[_Key, int] = {}
# Keys whose launcher failed (or whose threads made forking unsafe): plain from then on.
_failed: set[_Key] = set()
_WHEN = ("", "never", "always")


def start_worker(
    argv: Sequence[str],
    env: Mapping[str, str],
    tree: ProcessTree,
    plain: bool,
    timeout: float,
) -> subprocess.Popen[bytes] | WarmWorker:
    """Start the worker `argv` (`python -m MODULE ...`) with `env` in its own session, its stdin
    empty and its stdout and stderr pipes to us; forked by a warm launcher when one can serve it
    (never if `plain`), whose mark `tree` then learns. `timeout` bounds a launcher's start."""
    if os.environ.get(WARM_VARIABLE, "") not in _WHEN:
        raise GradcheckError(
            f"{WARM_VARIABLE}: {os.environ[WARM_VARIABLE]!r} is neither 'never' nor 'always'"
        )
    cwd = os.getcwd()
    key: _Key = (
        sys.executable,
        _import_folder(cwd, env),
        # The trees this process belongs to mark its launcher too.
        os.environ.get(MARK_VARIABLE, ""),
        frozenset((k, v) for k, v in env.items() if not per_launch(k)),
    )
    launcher = None if plain else _launcher_for(key, env, cwd)
    if launcher is not None:
        try:
            return _start_warm(launcher, argv, env, cwd, tree, timeout)
        except OSError:  # the launcher failed to start, or died: a plain worker instead
            _give_up(key, launcher)
            with _lock:
                _failed.add(key)
        except BaseException:  # a stop signal: a worker may have been forked meanwhile
            _give_up(key, launcher)
            tree.end([])
            raise
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        start_new_session=True,
    )


# Variables whose relative paths Python or TensorFlow resolve against the working folder at import.
_PATH_PREFIXES = ("PYTHON", "TF_", "TENSORFLOW", "KERAS", "XLA_", "CUDA", "LD_")


def _import_folder(cwd: str, env: Mapping[str, str]) -> str:
    """The folder a launcher imports TensorFlow in: `/`, shared by every working folder, unless
    the environment holds a relative path that the import would resolve against `cwd`
    (`PYTHONPATH=.`); each worker it forks then moves to its own working folder."""
    for name, value in env.items():
        if not name.startswith(_PATH_PREFIXES) or per_launch(name):
            continue
        entries = value.split(os.pathsep) if name == "PYTHONPATH" else [value]
        for entry in entries:
            looks_like_path = name == "PYTHONPATH" or "/" in entry or entry.startswith(".")
            if looks_like_path and not os.path.isabs(entry):
                return cwd
    return os.sep


def _launcher_for(key: _Key, env: Mapping[str, str], cwd: str) -> Launcher | None:
    """The idle launcher for `key`, started if this is the key's second launch; None: plain."""
    when = os.environ.get(WARM_VARIABLE, "")
    with _lock:
        _launches[key] = _launches.get(key, 0) + 1
        if when == "never" or (_launches[key] < 2 and when != "always") or key in _failed:
            return None
        launcher = _launchers.get(key)
        if launcher is not None and not launcher.alive():
            _launchers.pop(key).close()
            launcher = None
        if launcher is None:
            while len(_launchers) >= _MOST_LAUNCHERS:
                oldest_key = next(iter(_launchers))
                if _launchers[oldest_key].busy:
                    return None
                _launchers.pop(oldest_key).close()
            base = {k: v for k, v in env.items() if not per_launch(k)}
            if MARK_VARIABLE in os.environ:
                base[MARK_VARIABLE] = os.environ[MARK_VARIABLE]
            launcher = _launchers[key] = Launcher(base, key[1])
        elif launcher.busy:  # another thread's worker: its tree would end this one's
            return None
        _launchers.move_to_end(key)
        launcher.busy = True
        return launcher


def _start_warm(
    launcher: Launcher,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    tree: ProcessTree,
    timeout: float,
) -> WarmWorker:
    # Like Popen's: non-inheritable in this process; the child gets them as 0, 1 and 2.
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    tree.include(launcher.mark, spare=launcher.process.pid)
    try:
        pid = launcher.start(argv, env, cwd, (stdin, out_write, err_write), timeout)
        if pid is None:
            raise OSError("the launcher could not fork")
    except BaseException:
        os.close(out_read)
        os.close(err_read)
        raise
    finally:
        for fd in (stdin, out_write, err_write):
            os.close(fd)
    return WarmWorker(launcher, pid, os.fdopen(out_read, "rb"), os.fdopen(err_read, "rb"))


def _give_up(key: _Key, launcher: Launcher) -> None:
    launcher.busy = False
    with _lock:
        if _launchers.get(key) is launcher:
            del _launchers[key]
    launcher.close()


@atexit.register
def end_launchers() -> None:
    """End every launcher of this process (at exit; a stop signal ends in exit too)."""
    with _lock:
        launchers = list(_launchers.values())
        _launchers.clear()
    for launcher in launchers:
        with contextlib.suppress(OSError):
            launcher.close()
