"""Reports of the repository's scripts, each checked once per test process and shared by every
test module that asks for them through the `repository_checks` fixture (tests/conftest.py).

A check starts a TensorFlow worker (seconds of CPU), and several modules render or inspect the
same script's report: the seed script alone was checked by three. Reports are frozen values, so
sharing one cannot leak state between tests. Under pytest-xdist, conftest keeps every module
that uses the fixture on one worker, so each script is still checked once. Checks run one at a
time in the background: after the first, each worker forks from gradcheck's warm launcher, which
serves one worker at a time.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from gradcheck_cli import check
from gradcheck_cli.findings.report import Report

REPO = Path(__file__).resolve().parents[1]


class RepositoryChecks:
    """`check(REPO / path, loss)` with default options, started once, awaited by whoever asks."""

    def __init__(self, workers: int = 1) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._started: dict[tuple[str, str], Future[Report]] = {}

    def start(self, path: str, loss: str) -> Future[Report]:
        """Start checking `path` (relative to the repository) unless it already was."""
        key = (path, loss)
        if key not in self._started:
            self._started[key] = self._pool.submit(check, str(REPO / path), loss)
        return self._started[key]

    def reports(self, jobs: dict[str, tuple[str, str]]) -> dict[str, Report]:
        """name -> (path, loss), all started; the reports by name."""
        futures = {name: self.start(path, loss) for name, (path, loss) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)
