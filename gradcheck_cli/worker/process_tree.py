"""End every process gradcheck started, however it was started; stop cleanly on a signal."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterable, Mapping
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

# Every process gradcheck starts inherits this variable, so a descendant that left its process
# group (setsid) and lost its parent (a daemon's double fork) is still found by its environment.
MARK_VARIABLE = "GRADCHECK_PROCESS_TREES"

_POLL_SECONDS = 0.02
_KILL_ROUNDS = 50


class Stopped(SystemExit):
    """SIGINT or SIGTERM asked gradcheck to stop: a SystemExit carrying the shell's exit code
    (128 + signal), so `finally` blocks run and nothing prints a traceback."""


def stop_on_signals() -> None:
    """Make SIGINT and SIGTERM raise `Stopped` in the main thread; later ones are ignored, so a
    second Ctrl-C cannot break the cleanup that the first one started."""
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)


def _stop(signum: int, _frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped(128 + signum)


def stop_on_sigterm_only() -> None:
    """For a process of gradcheck's pool: the terminal's Ctrl-C reaches the whole foreground
    group, but only gradcheck itself decides to stop, and tells the pool with SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)


class ProcessTree:
    """The processes started under one mark: a child, its descendants, and theirs."""

    def __init__(self) -> None:
        self.mark = uuid.uuid4().hex
        self._marks = {self.mark}
        self._spared: set[int] = set()
        # create_time has a clock tick's resolution and is derived from the boot time.
        self._since = time.time() - 1.0

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` with this tree's mark added: the environment for a child of the tree."""
        env = dict(base)
        env[MARK_VARIABLE] = " ".join(filter(None, (base.get(MARK_VARIABLE, ""), self.mark)))
        return env

    def include(self, mark: str, spare: int) -> None:
        """Count processes marked `mark` in the tree too, but never `spare`: a warm launcher's
        mark, which its forked workers show (their environment as the kernel keeps it is the
        launcher's), and the launcher itself."""
        self._marks.add(mark)
        self._spared.add(spare)

    def enter(self) -> None:
        """Mark this process's own environment, so the children it starts belong to the tree."""
        os.environ[MARK_VARIABLE] = self.environment(os.environ)[MARK_VARIABLE]

    def end(self, roots: Iterable[int], grace: float = 0.0) -> None:
        """Kill `roots` (children of this process), the process groups they lead, their
        descendants and every marked process, until none is left running.

        With a `grace`, the roots first get SIGTERM and that many seconds to clean up.
        """
        import psutil

        processes = _existing(roots)
        if grace:
            for process in processes:
                with contextlib.suppress(psutil.Error):
                    process.terminate()
            deadline = time.monotonic() + grace
            while any(map(_running, processes)) and time.monotonic() < deadline:
                time.sleep(_POLL_SECONDS)
        found = _descendants(processes)
        for process in processes:
            # An unreaped child (a zombie too) keeps its pid, so the group id is still its own.
            if process.is_running():
                kill_group(process.pid)
        for _ in range(_KILL_ROUNDS):
            alive = [p for p in (*found, *self._marked()) if _running(p)]
            if not alive:
                return
            # Their children first, while the parent link that finds them still exists.
            found = _descendants(alive)
            for process in found:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            time.sleep(_POLL_SECONDS)

    def _marked(self) -> list[psutil.Process]:
        import psutil

        marked = []
        for process in psutil.process_iter(["create_time"]):
            if (process.info["create_time"] or 0.0) < self._since or process.pid in self._spared:
                continue
            try:
                marks = process.environ().get(MARK_VARIABLE, "")
            except psutil.Error:
                continue
            if self._marks.intersection(marks.split()):
                marked.append(process)
        return marked


def _existing(pids: Iterable[int]) -> list[psutil.Process]:
    import psutil

    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            processes.append(psutil.Process(pid))
    return processes


def _descendants(processes: Iterable[psutil.Process]) -> list[psutil.Process]:
    import psutil

    found = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            found += [process, *process.children(recursive=True)]
    return found


def kill_group(leader: int) -> None:
    """SIGKILL the process group `leader` leads (start_new_session), if it leads one: never a
    group it only belongs to, such as gradcheck's own."""
    try:
        if os.getpgid(leader) == leader:
            os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _running(process: psutil.Process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
