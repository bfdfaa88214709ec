"""The warm launcher: import TensorFlow and Keras once, then fork one worker per request.

Usage (by gradcheck itself, see warm_workers.py): python -m gradcheck_cli.jobs.warm_launcher FD
where FD is a Unix SOCK_SEQPACKET socket to the gradcheck process that started it. Each message is
a pickled tuple:

- ("launch", argv, env, cwd) with three file descriptors (the worker's stdin, stdout, stderr):
  fork a child that becomes the worker `python -m ARGV...` would start; reply ("started", pid).
- ("wait", pid) / ("poll", pid): reap the child (poll: only if it has ended); reply
  ("ended", returncode or None), negative for a signal, as subprocess.Popen reports it.

The launcher says ("ready", pid) once TensorFlow is imported, and exits when the socket closes:
gradcheck ended, or gave it up. It reaps a child only when asked, so a worker that ended stays a
zombie whose pid (and process group id) nobody reuses before gradcheck has ended its tree.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import runpy
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

from gradcheck_cli.worker.protocol import MESSAGE_BYTES

_STDIO = 3

_Handler = Callable[[int, FrameType | None], Any] | int | None


def main(argv: list[str]) -> int:
    channel = socket.socket(fileno=int(argv[1]))
    # What a freshly started Python has; a child gets these back, whatever the imports set.
    start_handlers = {signum: signal.getsignal(signum) for signum in _catchable()}
    import tensorflow  # noqa: F401

    try:
        import keras  # noqa: F401
    except ImportError:
        pass
    import gradcheck_cli.jobs.worker_entry  # noqa: F401

    # fork() copies only the calling thread: a Python thread would be missing mid-way in every
    # child, with whatever lock it held. The imports start none; the one OS thread they start is
    # NumPy's OpenBLAS pool, which OpenBLAS itself shuts down before a fork and starts again in
    # the child (pthread_atfork), and TensorFlow starts its own pools at first use, in the child.
    if threading.active_count() != 1:
        return 1
    channel.send(pickle.dumps(("ready", os.getpid())))
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(channel, MESSAGE_BYTES, _STDIO)
        except OSError:
            return 0
        if not message:
            return 0
        request = pickle.loads(message)
        if request[0] == "launch":
            _, worker_argv, env, cwd = request
            pid = os.fork()
            if pid == 0:
                _become_worker(channel, worker_argv, env, cwd, fds, start_handlers)
            for fd in fds:
                os.close(fd)
            reply: tuple[str, int | None] = ("started", pid)
        else:
            reply = ("ended", _reap(request[1], block=request[0] == "wait"))
        channel.send(pickle.dumps(reply))


def _reap(pid: int, block: bool) -> int | None:
    try:
        reaped, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return None
    if reaped == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def _become_worker(
    channel: socket.socket,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    fds: list[int],
    start_handlers: dict[int, _Handler],
) -> None:
    """In the forked child: what subprocess.Popen(start_new_session=True) and `python -m` set up,
    then the worker module as __main__; never returns."""
    code = 1
    try:
        channel.close()
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        for signum, handler in start_handlers.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(signum, handler)
        _fresh_random_state()
        module = argv[argv.index("-m") + 1]
        sys.argv = [module, *argv[argv.index("-m") + 2 :]]
        # `python -m` runs it as __main__ only; its imports stay loaded.
        sys.modules.pop(module, None)
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _exit_code(code: object) -> int:
    """The process exit code for `sys.exit(code)`, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _fresh_random_state() -> None:
    # Python's random reseeds itself after a fork; NumPy's global generator does not, and a fresh
    # worker would have drawn a new seed.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _catchable() -> list[int]:
    return [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
