"""What a crafted repository can and cannot make a check do. Each payload writes a marker file
when it runs: the marker must never appear."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.cli import command
from tests.cli_runs import cli_result

# Modules a worker imports, or may import, while it loads a model: planted in the working
# folder of a check, each would run in the worker if that folder were on its sys.path.
SHADOWED = ("pickle", "numpy", "h5py", "absl", "google")


def _plant(folder: Path, marker_dir: Path) -> None:
    for name in SHADOWED:
        marker = marker_dir / f"ran_{name}"
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import keras
    import tensorflow as tf

    where = tmp_path_factory.mktemp("models")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    model.save(where / "model.keras")

    class Module(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(tf.ones([3]), name="w")

        @tf.function(input_signature=[])
        def loss(self) -> tf.Tensor:
            return tf.reduce_sum(self.w * 2.0)

    module = Module()
    tf.saved_model.save(module, str(where / "saved"), signatures={"loss": module.loss})
    return {"keras": where / "model.keras", "saved": where / "saved"}


@pytest.mark.parametrize(
    ("model", "extra"), [("keras", ()), ("saved", ("--loss", "loss", "--verify"))]
)
def test_modules_in_the_working_folder_never_run_in_the_worker(
    model: str,
    extra: tuple[str, ...],
    models: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repository = tmp_path / "repository"
    markers = tmp_path / "markers"
    repository.mkdir()
    markers.mkdir()
    _plant(repository, markers)
    monkeypatch.chdir(repository)
    for warm in ("always", "never"):  # a forked warm worker, and a fresh one
        monkeypatch.setenv("GRADCHECK_WARM_WORKERS", warm)
        result = cli_result(command, [str(models[model]), "--no-cache", *extra])
        assert result.exit_code == 0, (warm, result.stdout, result.stderr)
        assert list(markers.iterdir()) == [], warm


SECRET = "gradcheck-test-secret-3f9c1e"

STOPPED = """
import tensorflow as tf


class Module(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.ones([3]), name="w")

    @tf.function(input_signature=[])
    def loss(self):
        return tf.reduce_sum(tf.stop_gradient(self.w) * 2.0)
"""


@pytest.fixture(scope="module")
def debug_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SavedModel with debug info whose dead variable has a cut at a line of `model.py`."""
    import importlib.util

    import tensorflow as tf

    where = tmp_path_factory.mktemp("debug_model")
    source = where / "model.py"
    source.write_text(STOPPED)
    spec = importlib.util.spec_from_file_location("crafted_model_source", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    instance = module.Module()
    options = tf.saved_model.SaveOptions(save_debug_info=True)
    tf.saved_model.save(instance, str(where / "saved"), options=options)
    return where / "saved"


def _crafted_copy(model: Path, target: str, into: Path) -> Path:
    """`model` with every source file its debug info names replaced by `target`."""
    import shutil

    from tensorflow.core.framework import graph_debug_info_pb2

    copy = into / "crafted"
    shutil.copytree(model, copy)
    debug = copy / "debug" / "saved_model_debug_info.pb"
    info = graph_debug_info_pb2.GraphDebugInfo.FromString(debug.read_bytes())
    files = [target] * len(info.files)
    del info.files[:]
    info.files.extend(files)
    debug.write_bytes(info.SerializeToString())
    return copy


@pytest.mark.parametrize(
    "target",
    ["/proc/self/environ", "/etc/passwd", "/dev/zero", "fifo.py", ".git/config", "../secret.py"],
)
def test_a_crafted_debug_info_prints_no_file_it_names(
    target: str, debug_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    repository = tmp_path / "repository"
    (repository / ".git").mkdir(parents=True)
    (repository / ".git" / "config").write_text(f"url = https://x:{SECRET}@example.com\n" * 20)
    (tmp_path / "secret.py").write_text(f"TOKEN = '{SECRET}'\n" * 20)
    os.mkfifo(repository / "fifo.py")
    monkeypatch.chdir(repository)
    monkeypatch.setenv("GRADCHECK_TEST_TOKEN", SECRET)
    crafted = _crafted_copy(debug_model, target, tmp_path)
    for form in ("terminal", "json", "sarif", "markdown", "github", "dot"):
        result = cli_result(command, [str(crafted), "--loss", "loss", "-f", form, "--no-cache"])
        assert result.exit_code == 1, (form, result.stdout, result.stderr)
        assert SECRET not in result.stdout + result.stderr, form
        assert "root:" not in result.stdout, form


def test_the_model_s_own_source_is_still_quoted(
    debug_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check works from the model's folder: its source file there is quoted.
    monkeypatch.chdir(debug_model.parent)
    result = cli_result(command, [str(debug_model), "--loss", "loss", "--no-cache"])
    assert result.exit_code == 1, result.stderr
    assert "tf.reduce_sum(tf.stop_gradient(self.w) * 2.0)" in result.stdout


def test_a_check_leaves_no_temporary_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # autograph writes a module per converted function into the temporary folder; the worker
    # ends with os._exit, so only its own scratch folder, removed by gradcheck, may hold them.
    temporary = tmp_path / "system-temp"
    temporary.mkdir()
    script = tmp_path / "model.py"
    script.write_text(
        "import tensorflow as tf\n\nw = tf.Variable(1.0)\n\n\n"
        "@tf.function\ndef loss():\n    total = 0.0\n    for _ in tf.range(3):\n"
        "        total += w\n    return total\n"
    )
    monkeypatch.setenv("TMPDIR", str(temporary))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    for warm in ("always", "never"):
        monkeypatch.setenv("GRADCHECK_WARM_WORKERS", warm)
        result = cli_result(command, [str(script), "--loss", "loss", "--no-cache"])
        assert result.exit_code == 0, result.stderr
        assert sorted(p.name for p in temporary.iterdir()) == [], warm


def test_a_script_without_stdout_and_with_a_thread_still_gets_its_report(
    tmp_path: Path,
) -> None:
    # The script drops sys.stdout and leaves a non-daemon thread running: the worker still
    # delivers its result, and ends, long before the timeout.

    from gradcheck_cli.cli import run_command

    script = tmp_path / "train.py"
    script.write_text(
        "import sys, threading, time\nimport tensorflow as tf\n\n"
        "sys.stdout = None\nthreading.Thread(target=lambda: time.sleep(3600)).start()\n"
        "w = tf.Variable(1.0)\nfor _ in range(2):\n    with tf.GradientTape() as tape:\n"
        "        loss = w * 2.0\n    (g,) = tape.gradient(loss, [w])\n    w.assign_sub(0.1 * g)\n"
    )
    # The sleeping thread does not hold the check to its time limit: a report, exit 0 (a
    # timeout would be exit 2 and no report).
    result = cli_result(run_command, [str(script), "--timeout", "120", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    assert '"status": "ok"' in result.stdout
    assert "Traceback" not in result.stderr


DAEMON = """
import os
import tensorflow as tf

pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve("/bin/sleep", ["sleep", "{seconds}"], {{}})
    os._exit(0)
os.waitpid(pid, 0)
w = tf.Variable(1.0)


def loss():
    return w * 2.0
"""


def test_a_daemon_that_leaves_every_trace_behind_does_not_outlive_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Double fork, setsid, exec with an empty environment: no parent link, no process group,
    # no mark in its environment. The worker is its subreaper, and ends it.
    import psutil

    seconds = "301.5"  # a command line no other process has
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON.format(seconds=seconds))
    for warm in ("always", "never"):
        monkeypatch.setenv("GRADCHECK_WARM_WORKERS", warm)
        result = cli_result(command, [str(script), "--loss", "loss", "--no-cache"])
        assert result.exit_code == 0, result.stderr
        left = [
            p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", seconds]
        ]
        for process in left:
            process.kill()
        assert left == [], warm


THREAD_STEP = """
import sys, threading
import tensorflow as tf

w = tf.Variable(1.0)


def step():
    with tf.GradientTape() as tape:
        loss = tf.stop_gradient(w) * 2.0
    tape.gradient(loss, [w])
    w.assign_sub(0.1)


thread = threading.Thread(target=step)
thread.start()
thread.join()
open(sys.argv[1], "w").write("the main thread trained on")
"""


def test_a_gradient_requested_in_a_thread_stops_the_whole_script(tmp_path: Path) -> None:
    from gradcheck_cli.cli import run_command

    script = tmp_path / "train.py"
    script.write_text(THREAD_STEP)
    marker = tmp_path / "marker"
    result = cli_result(run_command, [str(script), "-f", "json", "--", str(marker)])
    assert result.exit_code == 1, result.stderr  # w is cut by its tf.stop_gradient
    assert '"status": "blocked"' in result.stdout
    assert "Traceback" not in result.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "allocation",
    ["blob = bytearray(2 * 2**30)", "blob = tf.ones([2 * 2**30], tf.uint8)"],
    ids=["python", "tensorflow"],
)
def test_a_script_past_the_memory_limit_is_one_line_naming_the_limit(
    allocation: str, tmp_path: Path
) -> None:
    script = tmp_path / "hungry.py"
    script.write_text(
        f"import tensorflow as tf\n\n{allocation}\nw = tf.Variable(1.0)\n\n\n"
        "def loss():\n    return w * 2.0\n"
    )
    result = cli_result(command, [str(script), "--loss", "loss", "--memory-limit", "1GiB"])
    assert result.exit_code == 2, result.stdout
    ours = [line for line in result.stderr.splitlines() if line.startswith("gradcheck:")]
    assert len(ours) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "hungry.py:3" in ours[0]
    assert "may use 1 GiB of memory" in ours[0] and "--memory-limit" in ours[0]


def test_a_result_that_cannot_be_written_is_gradcheck_s_one_line_not_the_script_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker cannot write its result (as in a full temporary folder; here each file is
    # capped at 16 KiB, the request fits, a result with 200 variables does not): one line
    # about gradcheck's temporary files, never a traceback shown as the script's output.
    import resource
    import signal

    script = tmp_path / "wide.py"
    script.write_text(
        "import tensorflow as tf\n\nws = [tf.Variable(1.0, name=f'w{i}') for i in range(200)]\n"
        "\n\ndef loss():\n    return tf.add_n([w * 2.0 for w in ws])\n\n\n"
        'if __name__ == "__main__":\n    with tf.GradientTape() as tape:\n'
        "        value = loss()\n    tape.gradient(value, ws)\n"
    )
    from gradcheck_cli.cli import run_command

    # A worker of its own, started under the file size limit (a warm launcher's fork would
    # have the launcher's).
    monkeypatch.setenv("GRADCHECK_WARM_WORKERS", "never")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, hard))
    try:
        plain = cli_result(command, [str(script), "--loss", "loss", "--no-cache"])
        run = cli_result(run_command, [str(script)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, ignored)
    for result in (plain, run):
        assert result.exit_code == 2, result.stdout
        assert "Traceback" not in result.stderr, result.stderr
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("gradcheck")]
        assert "gradcheck cannot write its temporary files" in line, line
        assert "set TMPDIR" in line


def test_a_result_written_before_the_timeout_is_delivered(tmp_path: Path) -> None:
    # The script's stdout blocks in flush: the worker writes its result, then hangs in its
    # last flush until the timeout. The written result is the answer, not "never asked".
    from gradcheck_cli.cli import run_command

    script = tmp_path / "train.py"
    script.write_text(
        "import sys, time\nimport tensorflow as tf\n\n\nclass Stuck:\n"
        "    def write(self, text):\n        return len(text)\n\n"
        "    def flush(self):\n        time.sleep(3600)\n\n\n"
        "sys.stdout = Stuck()\nw = tf.Variable(1.0)\nwith tf.GradientTape() as tape:\n"
        "    loss = tf.stop_gradient(w) * 2.0\ntape.gradient(loss, [w])\n"
    )
    result = cli_result(run_command, [str(script), "--timeout", "8", "-f", "json"])
    assert result.exit_code == 1, result.stderr
    assert "did not ask" not in result.stderr
    import tensorflow as tf

    w = tf.Variable(1.0)  # the script's step, as TensorFlow judges it
    with tf.GradientTape() as tape:
        loss = tf.stop_gradient(w) * 2.0
    assert tape.gradient(loss, [w]) == [None]
    assert '"status": "blocked"' in result.stdout
