"""Workers forked by a warm launcher: the same reports, the same ends, and the plain path where
the launcher cannot serve exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.worker import warm_workers
from gradcheck_cli.worker.process import run_worker
from gradcheck_cli.worker.process_tree import ProcessTree
from gradcheck_cli.worker.protocol import Job, WorkerRequest

ROOT = Path(__file__).parents[2]
SCRIPTS = ROOT / "tests" / "scripts"
LAUNCHER = "gradcheck_cli.jobs.warm_launcher"

# Checks a script twice in one process (traced both times: not from the cache), then says which
# processes were its launchers.
TWICE = """
import json, sys
import psutil
from gradcheck_cli import api
from gradcheck_cli.reporters import Format, render
paths = sys.argv[1:] * 2
reports = [render(api.check(p, "loss", verify=True, cache=False), Format.JSON) for p in paths]
launcher = "gradcheck_cli.jobs.warm_launcher"
launchers = [p.pid for p in psutil.Process().children() if launcher in p.cmdline()]
print(json.dumps({"reports": reports, "launchers": launchers}))
"""


def _launcher_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children() if LAUNCHER in p.cmdline()]


def _ended(pid: int, grace: float = 30.0) -> bool:
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_second_check_is_forked_warm_reports_the_same_and_no_launcher_outlives_gradcheck(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    scripts = [SCRIPTS / "keras_fit_then_function.py", SCRIPTS / "tf1_graph_mode.py"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "GRADCHECK_TEST_PIDS": str(pids),
    }
    env.pop(warm_workers.WARM_VARIABLE, None)
    done = subprocess.run(
        [sys.executable, "-c", TWICE, *map(str, scripts)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    # keras fit then a tf.function, and a TF1 graph, each verified by TensorFlow's gradients.
    reports = [json.loads(report) for report in outcome["reports"]]
    assert reports[:2] == reports[2:]
    for report in reports:
        statuses = {
            v["name"].split("/")[0]: v["status"] for v in report["variables"] if v["trainable"]
        }
        assert statuses.pop("unused") == "blocked"
        assert set(statuses.values()) == {"ok"}, statuses
    [launcher] = outcome["launchers"]
    # The fit script ran twice: first a plain child of the gradcheck process, then a child of
    # the launcher.
    (first_pid, first_parent), (second_pid, second_parent) = (
        map(int, line.split()) for line in pids.read_text().splitlines()
    )
    assert first_pid != second_pid
    assert second_parent == launcher
    assert first_parent != launcher
    assert _ended(launcher), "the launcher outlived the gradcheck process"


def test_a_warm_worker_over_its_time_limit_ends_with_its_whole_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = tmp_path / "pids"
    monkeypatch.setenv(warm_workers.WARM_VARIABLE, "always")
    monkeypatch.setenv("GRADCHECK_TEST_PIDS", str(pids))
    script = SCRIPTS / "warm_children_then_hang.py"
    # A first check starts the launcher (TensorFlow's import); the limit then counts the script.
    run_worker(WorkerRequest(Job.SCRIPT, SCRIPTS / "argmax_loss.py", CheckOptions(loss="loss")))
    limit = 8
    with pytest.raises(GradcheckError, match=f"did not finish within {limit} s"):
        run_worker(WorkerRequest(Job.SCRIPT, script, CheckOptions(loss="loss", timeout=limit)))
    lines = pids.read_text().split()
    parent = int(lines[0].removeprefix("parent="))
    launcher = psutil.Process(parent)
    assert LAUNCHER in launcher.cmdline()
    assert launcher.ppid() == os.getpid()
    # The worker, its forked child, a child in its own session, and two daemons (one forked
    # without exec, which only the launcher's mark finds): all ended, the launcher spared.
    left = [int(line) for line in lines[1:] if line != "ready"]
    assert len(left) == 5
    assert [pid for pid in left if not _ended(pid)] == []
    assert launcher.is_running()


def test_debug_and_a_differing_environment_start_plain_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(warm_workers.WARM_VARIABLE, raising=False)
    argv = [sys.executable, "-m", "gradcheck_cli.jobs.worker_entry", "--help"]
    # A key of its own, not shared with the launchers of other tests in this process.
    base = {**os.environ, "WARM_WORKERS_TEST_KEY": str(tmp_path)}
    before = {p.pid for p in _launcher_children()}

    def start(env: dict[str, str], plain: bool = False) -> object:
        worker = warm_workers.start_worker(argv, env, ProcessTree(), plain, timeout=60)
        ProcessTree().end([worker.pid])
        worker.wait()
        for stream in (worker.stdout, worker.stderr):
            assert stream is not None
            stream.close()
        return worker

    # The first worker, the debugging ones, and one whose environment differs in a key that
    # TensorFlow could read: each the key's first launch, or plain by request.
    assert isinstance(start(base), subprocess.Popen)
    assert isinstance(start(base, plain=True), subprocess.Popen)
    assert isinstance(start({**base, "TF_NUM_INTEROP_THREADS": "1"}), subprocess.Popen)
    assert {p.pid for p in _launcher_children()} == before
    # Only per-launch keys differ: gradcheck's own variables and pytest's current test. The
    # key's second launch is warm.
    own = {"GRADCHECK_PROGRESS_FILE": str(tmp_path / "progress"), "GRADCHECK_TIMEOUT": "7"}
    warm = start({**base, **own, "PYTEST_CURRENT_TEST": "t (call)"})
    assert isinstance(warm, warm_workers.WarmWorker)
    assert {p.pid for p in _launcher_children()} - before == {warm.launcher.process.pid}


def test_an_unknown_warm_workers_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warm_workers.WARM_VARIABLE, "sometimes")
    request = WorkerRequest(Job.SCRIPT, SCRIPTS / "raises.py", CheckOptions(loss="loss"))
    with pytest.raises(GradcheckError, match="^GRADCHECK_WARM_WORKERS: 'sometimes' is neither"):
        run_worker(request)


# Checks one script from each folder given, in turn, then says which processes were launchers.
FOLDERS = """
import json, os, sys
import psutil
from gradcheck_cli import api
script, *folders = sys.argv[1:]
for folder in folders:
    os.chdir(folder)
    api.check(script, "loss", cache=False)
launcher = "gradcheck_cli.jobs.warm_launcher"
print(json.dumps([p.pid for p in psutil.Process().children() if launcher in p.cmdline()]))
"""
WHERE_AM_I = """import os
import tensorflow as tf

with open(os.environ["GRADCHECK_TEST_FOLDERS"], "a") as record:
    record.write(os.getcwd() + "\\n")
w = tf.Variable(1.0)


def loss():
    return w * w
"""


def test_one_launcher_serves_every_working_folder(tmp_path: Path) -> None:
    script = tmp_path / "where.py"
    script.write_text(WHERE_AM_I)
    folders = [tmp_path / name for name in ("a", "b", "c")]
    for folder in folders:
        folder.mkdir()
    record = tmp_path / "folders"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRADCHECK_TEST_FOLDERS": str(record)}
    env.pop(warm_workers.WARM_VARIABLE, None)
    done = subprocess.run(
        [sys.executable, "-c", FOLDERS, str(script), *map(str, folders)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # Each worker ran in its own working folder, forked or not.
    assert record.read_text().split() == [str(folder) for folder in folders]
    # The first check is plain, the next two fork from one launcher.
    assert len(json.loads(done.stdout)) == 1


@pytest.mark.parametrize(
    ("variable", "value", "own_folder"),
    [
        ("PYTHONPATH", ".", True),
        ("PYTHONPATH", "/opt/lib:src", True),
        ("PYTHONPATH", "/opt/lib", False),
        ("TF_CONFIG_DIR", "./config", True),
        ("TF_CPP_MIN_LOG_LEVEL", "2", False),
        ("HOME", "relative/home", False),  # not read as a path by the import
        ("GRADCHECK_PROGRESS_FILE", "./progress", False),  # passed at each launch
    ],
)
def test_a_relative_path_the_import_resolves_keys_the_launcher_by_folder(
    variable: str, value: str, own_folder: bool
) -> None:
    """With `PYTHONPATH=.` TensorFlow's import would see the launcher's folder, not the
    worker's: such an environment gets a launcher per working folder."""
    folder = warm_workers._import_folder("/work/here", {variable: value})  # noqa: SLF001
    assert folder == ("/work/here" if own_folder else os.sep)
