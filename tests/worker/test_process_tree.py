"""Nothing gradcheck starts outlives it: the worker's children, a time limit, signals, a pool.

gradcheck runs as a command here, as a user or a CI job runs it; the scripts record the pids of
every process they start, and each test checks that none is left running (a zombie waiting for
its reaper counts as ended).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).parents[2]
SCRIPTS = ROOT / "tests" / "scripts"
HANGS = SCRIPTS / "children_then_hang.py"
START_SECONDS = 90  # TensorFlow's import in the worker, on a busy machine
MIB = 1024 * 1024


@dataclass
class Gradcheck:
    """One `gradcheck` command running in its own session, and where its scripts record pids."""

    process: subprocess.Popen[bytes]
    pids: Path
    scratch: Path

    def ready(self, count: int = 1) -> list[psutil.Process]:
        """Wait until `count` scripts have started their children; all the processes recorded."""
        deadline = time.monotonic() + START_SECONDS
        while self._lines().count("ready") < count:
            assert self.process.poll() is None, self.process.communicate()
            assert time.monotonic() < deadline, "the scripts never started their children"
            time.sleep(0.05)
        return [psutil.Process(int(line)) for line in self._lines() if line != "ready"]

    def finish(self, timeout: float) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out.decode(), err.decode()

    def _lines(self) -> list[str]:
        return self.pids.read_text().split() if self.pids.exists() else []


Start = Callable[..., Gradcheck]


def _start(directory: Path, *args: str, **env: str) -> Gradcheck:
    """`gradcheck ARGS` in its own session; its scripts record pids in `directory`/pids."""
    scratch = directory / "tmp"
    scratch.mkdir(exist_ok=True)
    pids = directory / "pids"
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "GRADCHECK_TEST_PIDS": str(pids),
        "TMPDIR": str(scratch),
        **env,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck_cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        start_new_session=True,
    )
    return Gradcheck(process, pids, scratch)


def _kill(runs: list[Gradcheck]) -> None:
    """A failed test must not leave its processes behind either: gradcheck, asked to stop, ends
    its workers' trees; killed if it does not."""
    for run in runs:
        if run.process.poll() is None:
            os.kill(run.process.pid, signal.SIGTERM)
            try:
                run.process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(run.process.pid, signal.SIGKILL)
                run.process.communicate()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    runs: list[Gradcheck] = []

    def start(*args: str, **env: str) -> Gradcheck:
        runs.append(_start(tmp_path, *args, **env))
        return runs[-1]

    yield start
    _kill(runs)


TIME_LIMIT = 25  # long enough for the script to start its children on a loaded 2-core machine


class OverTimeLimit(threading.Thread):
    """A gradcheck run of a script that never finishes, under a time limit, awaited in the
    background once the script has started its children: its exit code, output and end."""

    def __init__(self, gradcheck: Gradcheck) -> None:
        super().__init__(daemon=True)
        self.gradcheck = gradcheck
        self.children = gradcheck.ready()
        self.finished: tuple[int, str, str] | None = None
        self.start()

    def run(self) -> None:
        self.finished = self.gradcheck.finish(timeout=START_SECONDS)

    def stop(self) -> None:
        """If gradcheck still runs (its test was deselected or failed): stopped, then killed."""
        process = self.gradcheck.process
        for stop in (lambda: process.terminate(), lambda: os.killpg(process.pid, signal.SIGKILL)):
            if process.poll() is None:
                stop()
                self.join(timeout=10)


@pytest.fixture(scope="module", autouse=True)
def over_time_limit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OverTimeLimit]:
    """Started with the module, so the other tests run while gradcheck waits out the limit;
    the module's last test checks how it ended."""
    gradcheck = _start(
        tmp_path_factory.mktemp("time_limit"),
        *(str(HANGS), "--loss", "loss", "--timeout", str(TIME_LIMIT)),
    )
    try:
        waiting = OverTimeLimit(gradcheck)
    except BaseException:
        _kill([gradcheck])
        raise
    yield waiting
    waiting.stop()


def assert_all_ended(processes: list[psutil.Process], grace: float = 30.0) -> None:
    deadline = time.monotonic() + grace
    while left := [p for p in processes if _running(p)]:
        assert time.monotonic() < deadline, f"still running: {left}"
        time.sleep(0.05)


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_at_most_one_line(err: str) -> None:
    assert "Traceback" not in err, err
    assert len([line for line in err.splitlines() if line.startswith("gradcheck:")]) <= 1, err


def test_children_a_script_leaves_do_not_delay_the_verdict_and_end_with_it(start: Start) -> None:
    run = start(str(SCRIPTS / "children_then_loss.py"), "--loss", "loss", "-f", "json")
    children = run.ready()
    code, out, err = run.finish(timeout=START_SECONDS)
    # The children never end: had gradcheck waited for their open pipes, it would have reached
    # its 600 s time limit (exit 2, "did not finish") long after `finish`'s hang guard.
    assert code == 0, err
    assert "did not finish" not in err, err
    assert [v["status"] for v in json.loads(out)["variables"]] == ["ok"]
    assert_at_most_one_line(err)
    assert_all_ended(children)


@pytest.mark.parametrize(
    ("signum", "code", "to_group"),
    [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_stop_signal_ends_the_worker_s_tree_and_its_scratch_folder(
    start: Start, signum: signal.Signals, code: int, to_group: bool
) -> None:
    run = start(str(HANGS), "--loss", "loss", "--timeout", "600")
    children = run.ready()
    # Ctrl-C in a terminal reaches the whole foreground group; `kill` only gradcheck.
    (os.killpg if to_group else os.kill)(run.process.pid, signum)
    assert run.finish(timeout=10) == (code, "", f"gradcheck: interrupted by {signum.name}\n")
    assert_all_ended(children)
    assert not list(run.scratch.glob("gradcheck-*"))


def test_a_killed_gradcheck_s_worker_ends_its_own_tree(start: Start) -> None:
    # SIGKILL cannot be caught, so gradcheck cannot end its worker's tree: the worker, which
    # runs in a session of its own, ends it once its parent is gone.
    run = start(str(HANGS), "--loss", "loss", "--timeout", "600")
    children = run.ready()
    os.kill(run.process.pid, signal.SIGKILL)
    run.process.communicate()
    assert_all_ended(children, grace=30)
    deadline = time.monotonic() + 30
    while list(run.scratch.glob("gradcheck-*")):  # and removes gradcheck's scratch folder
        assert time.monotonic() < deadline, list(run.scratch.glob("gradcheck-*"))
        time.sleep(0.05)


def test_ctrl_c_ends_the_pool_its_workers_and_their_children(start: Start) -> None:
    run = start(str(HANGS), str(HANGS), "--loss", "loss", "--jobs", "2")
    children = run.ready(count=2)
    pool = psutil.Process(run.process.pid).children(recursive=True)
    os.killpg(run.process.pid, signal.SIGINT)
    assert run.finish(timeout=15) == (130, "", "gradcheck: interrupted by SIGINT\n")
    assert_all_ended(children + pool)
    assert not list(run.scratch.glob("gradcheck-*"))


def test_a_script_s_output_is_streamed_line_by_line_with_bounded_memory(
    start: Start, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    run = start(
        str(SCRIPTS / "prints_100_mb.py"), "--loss", "loss", "-f", "json", GRADCHECK_TEST_GO=str(go)
    )
    relayed = _Relayed(run.process)
    gradcheck = psutil.Process(run.process.pid)
    assert relayed.first_line.wait(START_SECONDS), "the first line waited for the worker's end"
    # Each line the script prints reaches stderr labelled with the script's name.
    label = b"prints_100_mb.py: "
    assert relayed.head.startswith(label + b"the first line\n")
    baseline = peak = gradcheck.memory_info().rss
    go.touch()
    while run.process.poll() is None:
        try:
            peak = max(peak, gradcheck.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.01)
    relayed.join()
    code, out, _ = run.finish(timeout=START_SECONDS)
    assert code == 0, relayed.tail
    assert json.loads(out)["summary"]["ok"] == 1
    assert relayed.size == len(label + b"the first line\n") + 100 * 10_000 * (len(label) + 100)
    print(f"peak RSS {peak / MIB:.0f} MiB, {(peak - baseline) / MIB:.0f} MiB above the baseline")
    assert peak - baseline < 150 * MIB


class _Relayed(threading.Thread):
    """Reads gradcheck's stderr as it comes: its size, its first and last bytes."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        super().__init__(daemon=True)
        assert process.stderr is not None
        self.stream = process.stderr
        self.first_line = threading.Event()
        self.head = b""
        self.tail = b""
        self.size = 0
        self.start()

    def run(self) -> None:
        while chunk := os.read(self.stream.fileno(), MIB):
            if not self.first_line.is_set():
                self.head += chunk
                if b"\n" in self.head:
                    self.first_line.set()
            self.size += len(chunk)
            self.tail = (self.tail + chunk)[-4096:]


def test_a_script_over_its_time_limit_ends_with_its_children(
    over_time_limit: OverTimeLimit,
) -> None:
    # The limit counts from the worker's start, TensorFlow's import included. The run started
    # with the module; this test comes last.
    over_time_limit.join(timeout=START_SECONDS)
    assert over_time_limit.finished is not None, "gradcheck did not end"
    code, out, err = over_time_limit.finished
    assert code == 2
    assert out == ""
    assert f"{HANGS} did not finish within {TIME_LIMIT} s" in err
    assert_at_most_one_line(err)
    assert_all_ended(over_time_limit.children)
