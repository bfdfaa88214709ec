"""The cache of traced scripts: a hit needs no worker and no TensorFlow and gives the same
report as a miss; any edit of what the script read, and any option that changes tracing, is a
miss; a broken entry is a miss, never an error."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cache import entry_codec, file_reads, script_cache
from gradcheck_cli.cache.file_reads import file_read, folder_read, unchanged
from gradcheck_cli.cli import command
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.options import CACHE_DIR_VARIABLE, CheckOptions
from gradcheck_cli.worker import process
from gradcheck_cli.worker.protocol import EagerResult, Job, Reads, WorkerRequest
from tests.cli_runs import invoke
from tests.oracle import dead_in_script, dead_names

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_models" / "module_tf2.py"
HIT = "using the cached result"

# -- the cache's own logic, with a stand-in worker (no TensorFlow) ---------------------------


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(folder))
    return folder


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / "entries").glob("*.json")) if folder.exists() else []


def _stored(entry: Path) -> dict[str, Any]:
    """An entry's body, past its signature line."""
    body: dict[str, Any] = json.loads(entry.read_bytes().partition(b"\n")[2])
    return body


class StandIn:
    """run_worker_recording's stand-in: an answer and what it read; counts its calls."""

    def __init__(self, reads: Reads) -> None:
        self.reads = reads
        self.calls = 0

    def __call__(self, request: WorkerRequest) -> tuple[EagerResult, Reads]:
        assert request.job is Job.SCRIPT
        self.calls += 1
        return EagerResult("loss", [], {}, None, f"answer {self.calls}"), self.reads


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "model.py"
    script.write_text("LOSS = 1\n")
    return script


def _request(script: Path, **options: object) -> WorkerRequest:
    chosen = CheckOptions(**{"loss": "loss", **options})  # type: ignore[arg-type]
    return WorkerRequest(Job.SCRIPT, script, chosen)


def test_an_unchanged_request_is_answered_from_the_cache_and_an_edit_traces_again(
    tmp_path: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = _script(tmp_path)
    worker = StandIn(Reads((file_read(str(script)),)))
    monkeypatch.setattr(process, "run_worker_recording", worker)
    first = script_cache.traced(_request(script))
    again = script_cache.traced(_request(script))
    assert worker.calls == 1 and again == (first[0], True) and first[1] is False
    assert capsys.readouterr().err == ""  # the caller tells the hit, once it made a report
    script_cache.tell_cached(_request(script))
    assert "gradcheck: model.py: nothing it read has changed" in capsys.readouterr().err
    script.write_text("LOSS = 2\n")
    assert script_cache.traced(_request(script))[0].reason == "answer 2"
    assert worker.calls == 2 and len(_entries(cache_dir)) == 1  # the stale entry replaced
    script_cache.tell_cached(_request(script, quiet=True))
    assert capsys.readouterr().err == ""  # -q: no word about the cache either


def test_no_cache_neither_reads_nor_writes_the_cache(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)
    monkeypatch.setattr(process, "run_worker_recording", StandIn(Reads(())))
    script_cache.traced(_request(script))
    stored = {path: path.read_bytes() for path in _entries(cache_dir)}
    answers = iter([EagerResult("loss", [], {}, None, "traced")])
    monkeypatch.setattr(process, "run_worker", lambda request: next(answers))
    assert script_cache.traced(_request(script, cache=False))[0].reason == "traced"
    assert {path: path.read_bytes() for path in _entries(cache_dir)} == stored


def test_failures_and_results_of_files_that_changed_meanwhile_are_not_stored(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)

    def fails(request: WorkerRequest) -> None:
        raise GradcheckError("model.py raised ValueError while gradcheck imported it")

    monkeypatch.setattr(process, "run_worker_recording", fails)
    with pytest.raises(GradcheckError):
        script_cache.traced(_request(script))
    unsettled = Reads((file_read(str(script)),), settled=False)
    monkeypatch.setattr(process, "run_worker_recording", StandIn(unsettled))
    script_cache.traced(_request(script))
    assert _entries(cache_dir) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: data[: len(data) // 2],
        lambda data: b"not an entry",
        lambda data: data.partition(b"\n")[0] + b"\n" + json.dumps({"format": 1}).encode(),
    ],
    ids=["empty", "truncated", "garbage", "foreign"],
)
def test_a_broken_entry_is_a_miss_and_is_replaced(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, damage: object
) -> None:
    script = _script(tmp_path)
    worker = StandIn(Reads((file_read(str(script)),)))
    monkeypatch.setattr(process, "run_worker_recording", worker)
    script_cache.traced(_request(script))
    [entry] = _entries(cache_dir)
    entry.write_bytes(damage(entry.read_bytes()))  # type: ignore[operator]
    assert script_cache.traced(_request(script))[0].reason == "answer 2"
    assert script_cache.traced(_request(script))[0].reason == "answer 2"  # stored again


def test_an_unwritable_cache_folder_is_passed_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(blocked / "cache"))
    monkeypatch.setattr(process, "run_worker_recording", StandIn(Reads(())))
    assert script_cache.traced(_request(script))[0].reason == "answer 1"


def test_the_cache_keeps_the_entries_used_last(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(script_cache, "MAX_ENTRIES", 3)
    monkeypatch.setattr(process, "run_worker_recording", StandIn(Reads(())))
    scripts = [tmp_path / f"model_{index}.py" for index in range(5)]
    for index, script in enumerate(scripts):
        script.write_text("")
        script_cache.traced(_request(script))
        if index == 3:
            script_cache.traced(_request(scripts[0]))  # used again: kept
        time.sleep(0.01)  # distinct modification times
    kept = {path.stem for path in _entries(cache_dir)}
    keys = [script_cache.cache_key(_request(script)) for script in scripts]
    assert kept == {keys[0], keys[3], keys[4]}
    assert (
        (cache_dir / "entries" / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172")
    )


def test_the_key_holds_every_option_that_changes_tracing_and_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)
    key = script_cache.cache_key(_request(script))
    changed = {
        "loss": "other",
        "verify": True,
        "unsafe_deserialization": True,
        "imports": ("layers",),
        "allow_dead": (("*", ""),),
        "all_cuts": True,
        "sum_loss": True,
        "timeout": 5.0,
        "memory_limit": 2**31,
        "debug": True,
        "quiet": True,
        "progress": True,
        "model_map": True,  # drawn in gradcheck's own process, from the cached trace
        "cache": False,
        "cache_dir": "/elsewhere",
    }
    assert set(changed) == {item.name for item in dataclasses.fields(CheckOptions)}
    keyed = {
        name
        for name, value in changed.items()
        if script_cache.cache_key(_request(script, **{name: value})) != key
    }
    assert keyed == {"loss", "verify", "unsafe_deserialization", "imports"}
    assert script_cache.cache_key(_request(tmp_path / "other.py")) != key
    monkeypatch.chdir(tmp_path)
    assert script_cache.cache_key(_request(script)) != key


def test_the_cache_folder_follows_the_platform_unless_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import platformdirs

    monkeypatch.setenv(CACHE_DIR_VARIABLE, "/from/variable")
    assert script_cache.cache_folder(CheckOptions()) == Path("/from/variable")
    assert script_cache.cache_folder(CheckOptions(cache_dir="/chosen")) == Path("/chosen")
    monkeypatch.delenv(CACHE_DIR_VARIABLE)
    expected = Path(platformdirs.user_cache_dir("gradcheck", appauthor=False))
    assert script_cache.cache_folder(CheckOptions()) == expected


def test_unchanged_sees_every_edit_even_within_one_clock_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, folder, absent = tmp_path / "data.json", tmp_path / "shards", tmp_path / "later.py"
    data.write_text('{"a": 1}')
    folder.mkdir()
    monkeypatch.setenv("CACHE_TEST_WIDTH", "2")
    reads = Reads(
        (file_read(str(data)), folder_read(str(folder)), file_read(str(absent))),
        environment=(("CACHE_TEST_WIDTH", "2"), ("CACHE_TEST_UNSET", None)),
    )
    assert unchanged(reads)
    # The same size and modification time: only the content tells.
    status = data.stat()
    data.write_text('{"a": 2}')
    os.utime(data, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert not unchanged(reads)
    data.write_text('{"a": 1}')
    assert unchanged(reads)
    (folder / "shard_b").write_text("")
    assert not unchanged(reads)
    (folder / "shard_b").unlink()
    absent.write_text("")
    assert not unchanged(reads)
    absent.unlink()
    monkeypatch.setenv("CACHE_TEST_UNSET", "1")
    assert not unchanged(reads)
    monkeypatch.delenv("CACHE_TEST_UNSET")
    monkeypatch.setenv("CACHE_TEST_WIDTH", "3")
    assert not unchanged(reads)


def test_installed_libraries_and_bytecode_are_not_the_users_files() -> None:
    _, libraries = file_reads.library_folders()
    assert not file_reads.is_user_file(os.path.realpath(pytest.__file__), libraries)
    assert not file_reads.is_user_file(os.path.realpath(os.__file__), libraries)
    assert not file_reads.is_user_file("/proc/cpuinfo", libraries)
    assert not file_reads.is_user_file(str(ROOT / "__pycache__" / "x.cpython-311.pyc"), libraries)
    assert file_reads.is_user_file(str(SAMPLE), libraries)


# -- with TensorFlow: the recording worker, and reports from hits ----------------------------

MODEL = '''\
"""A loss that depends on a local module, a data file, a folder's listing and a variable."""
import json
import os
from pathlib import Path

import tensorflow as tf

import helper

HERE = Path(__file__).parent
with open(HERE / "runs.log", "a") as log:  # one line per import, so the test counts them
    log.write("imported\\n")
CONFIG = json.loads((HERE / "config.json").read_text())
SHARDS = sorted(os.listdir(HERE / "shards"))
WIDTH = int(os.environ.get("CACHE_TEST_WIDTH", "2"))

weights = tf.Variable(tf.ones([WIDTH]), name="weights")
bias = tf.Variable(0.0, name="bias")
scales = [tf.Variable(1.0, name=f"scale_{shard}") for shard in SHARDS]


def loss():
    total = tf.reduce_sum(helper.transform(weights)) + sum(scales)
    return total + bias if CONFIG["use_bias"] else total
'''


def _statuses(stdout: str) -> dict[str, str]:
    import json

    return {v["name"]: v["status"] for v in json.loads(stdout)["variables"]}


def test_editing_any_file_the_script_read_invalidates_its_entry(
    tmp_path: Path, cache_dir: Path
) -> None:
    project = tmp_path / "project"
    (project / "shards").mkdir(parents=True)
    (project / "shards" / "a").write_text("")
    (project / "config.json").write_text('{"use_bias": false}')
    (project / "helper.py").write_text("def transform(w):\n    return w\n")
    script = project / "model.py"
    script.write_text(MODEL)

    def check(traced: bool) -> dict[str, str]:
        """The statuses; a miss imports the script (a line more in runs.log), a hit does not."""
        log = project / "runs.log"
        before = log.read_text() if log.exists() else ""
        code, stdout, stderr = invoke(command, [script, "--loss", "loss", "-f", "json"])
        assert code in (0, 1), stderr
        assert (log.read_text() != before) is traced, stderr
        assert (HIT in stderr) is not traced
        statuses = _statuses(stdout)
        if traced:  # TensorFlow judges the script as it is now (its import logs a line too)
            tensorflow = dead_names(dead_in_script(str(script), "loss"))
            assert {name for name, status in statuses.items() if status != "ok"} == tensorflow
        return statuses

    first = check(traced=True)
    assert first == {"weights": "ok", "bias": "unused", "scale_a": "ok"}
    assert check(traced=False) == first
    [entry] = _entries(cache_dir)
    recorded = entry_codec.loads(_stored(entry)["reads"])
    read = {Path(f.path).name for f in recorded.files}
    assert {"model.py", "helper.py", "config.json", "shards"} <= read
    assert "runs.log" not in read  # written, not read
    assert recorded.environment == (("CACHE_TEST_WIDTH", None),)

    (project / "config.json").write_text('{"use_bias": true}')  # a data file it opened
    assert check(traced=True)["bias"] == "ok"
    assert check(traced=False)["bias"] == "ok"
    (project / "helper.py").write_text(
        "import tensorflow as tf\n\n\ndef transform(w):\n    return tf.stop_gradient(w)\n"
    )  # a module it imported
    assert check(traced=True)["weights"] == "blocked"
    assert check(traced=False)["weights"] == "blocked"
    (project / "shards" / "b").write_text("")  # a folder it listed
    assert "scale_b" in check(traced=True)
    script.write_text(MODEL.replace('name="bias"', 'name="offset"'))  # the script itself
    assert "offset" in check(traced=True)
    assert "offset" in check(traced=False)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder holding the sample model's entry."""
    folder = tmp_path_factory.mktemp("stored")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_DIR_VARIABLE, str(folder))
        patch.chdir(ROOT)
        code, _, stderr = invoke(command, [SAMPLE.relative_to(ROOT), "--loss", "loss"])
        assert code == 1 and HIT not in stderr
    yield folder


@pytest.mark.parametrize("output_format", ["json", "text", "sarif", "terminal"])
def test_a_hit_renders_the_same_bytes_as_a_miss(
    stored: Path, monkeypatch: pytest.MonkeyPatch, output_format: str
) -> None:
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(stored))
    monkeypatch.chdir(ROOT)
    args = [str(SAMPLE.relative_to(ROOT)), "--loss", "loss", "-f", output_format, "-v"]
    entries = {path: path.stat().st_mtime_ns for path in _entries(stored)}
    miss = invoke(command, [*args, "--no-cache"])
    assert {path: path.stat().st_mtime_ns for path in _entries(stored)} == entries
    hit = invoke(command, args)
    assert HIT in hit.stderr and HIT not in miss.stderr
    assert (hit.returncode, hit.stdout) == (miss.returncode, miss.stdout)


def test_a_hit_imports_no_tensorflow(stored: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        import gradcheck_cli
        report = gradcheck_cli.check({str(SAMPLE)!r}, loss="loss")
        assert [v.name for v in report.dead] == ["output/kernel", "aux/kernel"], report.dead
        heavy = sorted(m for m in ("tensorflow", "keras", "numpy") if m in sys.modules)
        assert not heavy, heavy
        """
    )
    environ = {**os.environ, CACHE_DIR_VARIABLE: str(stored)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert HIT in done.stderr


def _traced_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, StandIn]:
    """A script traced once by a stand-in worker, its answer stored."""
    script = _script(tmp_path)
    worker = StandIn(Reads((file_read(str(script)),)))
    monkeypatch.setattr(process, "run_worker_recording", worker)
    script_cache.traced(_request(script))
    return script, worker


def test_a_planted_entry_is_never_used(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An entry whose signature is not the user's (a repository's own cache folder, another
    # user's): a miss, traced again, whatever it says. Entries are JSON: nothing in one runs.
    script, worker = _traced_once(tmp_path, monkeypatch)
    [entry] = _entries(cache_dir)
    signature, _, body = entry.read_bytes().partition(b"\n")
    forged = json.loads(body)
    forged["result"] = forged["result"].replace("answer 1", "forged")
    entry.write_bytes(signature + b"\n" + json.dumps(forged).encode())
    assert script_cache.traced(_request(script))[0].reason == "answer 2"
    assert entry_codec.loads(_stored(entry)["result"]).reason == "answer 2"  # replaced
    with pytest.raises(entry_codec.EntryError):
        entry_codec.loads('{"c": "Popen", "f": {}}')  # only gradcheck's own classes


def test_the_cache_folder_is_private_and_another_users_is_not_read(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, worker = _traced_once(tmp_path, monkeypatch)
    assert (cache_dir / "entries").stat().st_mode & 0o777 == 0o700
    assert (cache_dir / "entry-key").stat().st_mode & 0o777 == 0o600
    # Seen by another user, the folder is not theirs: no read, no write.
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    assert script_cache.traced(_request(script))[0].reason == "answer 2"
    assert worker.calls == 2


def test_pruning_removes_only_gradcheck_s_own_entries(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `cache-dir = "~"` in a repository's config: gradcheck writes only into its own folder,
    # and prunes only the entries it names; a CACHEDIR.TAG link is not followed.
    entries = cache_dir / "entries"
    entries.mkdir(parents=True, mode=0o700)
    target = tmp_path / "elsewhere.txt"
    (entries / "CACHEDIR.TAG").symlink_to(target)
    others = [entries / "notes.pickle", entries / "model.json", cache_dir / "CACHEDIR.TAG"]
    for other in others:
        other.write_text("the user's")
    monkeypatch.setattr(script_cache, "MAX_ENTRIES", 1)
    monkeypatch.setattr(process, "run_worker_recording", StandIn(Reads(())))
    for index in range(3):
        script = tmp_path / f"model_{index}.py"
        script.write_text("")
        script_cache.traced(_request(script))
    assert len(_entries(cache_dir)) == 1 + 1  # gradcheck's one entry, and the user's model.json
    assert all(other.read_text() == "the user's" for other in others)
    assert not target.exists()


def test_a_stop_while_an_entry_is_stored_leaves_no_partial_file(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    from gradcheck_cli.worker.process_tree import Stopped, stop_on_signals

    script = _script(tmp_path)
    monkeypatch.setattr(process, "run_worker_recording", StandIn(Reads(())))
    replace = os.replace

    def signalled(source: str, target: str) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # a real SIGTERM, between write and rename
        replace(source, target)

    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    stop_on_signals()  # as the gradcheck command does
    monkeypatch.setattr(os, "replace", signalled)
    try:
        with pytest.raises(Stopped):
            script_cache.traced(_request(script))
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert sorted(path.name for path in (cache_dir / "entries").iterdir()) == ["CACHEDIR.TAG"]


def test_a_partial_entry_a_killed_check_left_is_pruned_once_abandoned(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = cache_dir / "entries"
    entries.mkdir(parents=True, mode=0o700)
    abandoned, fresh = entries / ".k1ll3d00.partial", entries / ".wr1t1ng0.partial"
    for partial in (abandoned, fresh):
        partial.write_text("{")
    two_hours_ago = time.time() - 7200
    os.utime(abandoned, (two_hours_ago, two_hours_ago))
    monkeypatch.setattr(process, "run_worker_recording", StandIn(Reads(())))
    script_cache.traced(_request(_script(tmp_path)))
    assert not abandoned.exists()
    assert fresh.exists()  # perhaps another gradcheck's, still being written


def test_a_cache_on_a_full_disk_is_one_warning_and_the_check_goes_on(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import errno
    import tempfile

    script = _script(tmp_path)
    monkeypatch.setattr(process, "run_worker_recording", StandIn(Reads(())))

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkstemp", full)  # the key's and the entries' writes
    assert script_cache.traced(_request(script))[0].reason == "answer 1"
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "gradcheck: warning: the cache cannot be written (no space left on device); "
        "checked without it"
    ]
    assert not (cache_dir / "entry-key").exists()  # no key at all rather than an empty one


def test_a_damaged_key_is_replaced_and_the_cache_hits_again(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)
    worker = StandIn(Reads((file_read(str(script)),)))
    monkeypatch.setattr(process, "run_worker_recording", worker)
    cache_dir.mkdir(mode=0o700)
    key = cache_dir / "entry-key"
    key.write_bytes(b"")  # what a full disk left of an earlier key
    key.chmod(0o600)
    assert script_cache.traced(_request(script))[0].reason == "answer 1"
    assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o777 == 0o600
    assert script_cache.traced(_request(script))[0].reason == "answer 1"  # a hit
    assert worker.calls == 1


def test_under_umask_000_every_cache_folder_gradcheck_makes_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)
    home = tmp_path / "home" / ".cache" / "gradcheck"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(home))
    worker = StandIn(Reads((file_read(str(script)),)))
    monkeypatch.setattr(process, "run_worker_recording", worker)
    old = os.umask(0)
    try:
        script_cache.traced(_request(script))
        assert script_cache.traced(_request(script))[0].reason == "answer 1"  # a hit
    finally:
        os.umask(old)
    for folder in (tmp_path / "home", home.parent, home, home / "entries"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    assert (home / "entry-key").stat().st_mode & 0o777 == 0o600


KEY_RACE = """
import sys
from gradcheck_cli.cache import script_cache
sys.stdout.write(script_cache._secret().hex())
"""


def test_eight_checks_making_the_key_at_once_all_read_the_same_whole_key(
    tmp_path: Path,
) -> None:
    home = tmp_path / "cache"
    environment = {**os.environ, CACHE_DIR_VARIABLE: str(home)}
    started = [
        subprocess.Popen(
            [sys.executable, "-c", KEY_RACE], env=environment, stdout=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    keys = {process.communicate(timeout=120)[0] for process in started}
    assert len(keys) == 1 and len(next(iter(keys))) == 64, keys
    assert (home / "entry-key").read_bytes().hex() in keys
    assert sorted(p.name for p in home.iterdir()) == ["entry-key"]  # no partial key left
