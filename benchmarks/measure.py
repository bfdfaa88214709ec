"""One fresh process measured: wall time, CPU time (user + system, its waited-for children
included) and peak RSS, from `os.wait4`; and the medians of several."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Run:
    """One process: seconds of wall and CPU time, peak resident set in MiB, exit code."""

    wall: float
    cpu: float
    peak_rss_mib: float
    exit_code: int


@dataclass(frozen=True)
class Summary:
    """The medians of several runs of one command."""

    wall: float
    cpu: float
    peak_rss_mib: float
    runs: tuple[Run, ...]

    @classmethod
    def of(cls, runs: Sequence[Run]) -> Summary:
        return cls(
            wall=statistics.median(run.wall for run in runs),
            cpu=statistics.median(run.cpu for run in runs),
            peak_rss_mib=statistics.median(run.peak_rss_mib for run in runs),
            runs=tuple(runs),
        )


def measure(
    command: Sequence[str], env: Mapping[str, str], cwd: Path, stdout: Path | None = None
) -> Run:
    """Run `command` to its end in a fresh process; stdout to the file `stdout` (or nowhere),
    stderr nowhere."""
    with open(stdout if stdout is not None else os.devnull, "wb") as out:
        start = time.perf_counter()
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
        )
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            process.kill()
            process.wait()
            raise
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # already reaped: Popen must not wait
    # ru_maxrss is in KiB on Linux: the largest of the process and of its reaped descendants,
    # and of the memory it was started from: exec records the resident size of the process
    # image it replaces, which (forked or vforked) is the caller's. Callers stay small.
    return Run(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        peak_rss_mib=usage.ru_maxrss / 1024,
        exit_code=process.returncode,
    )
