"""A script that reads its settings through C code (SQLite, HDF5, TensorFlow's file system, a
program it starts) is re-traced when they change: the audit hook never sees those opens, the
cache must not answer from a stale entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.cache.unseen_reads import MAX_FOLDERS, TreeWatch
from gradcheck_cli.cli import command
from gradcheck_cli.options import CACHE_DIR_VARIABLE
from tests.cli_runs import invoke
from tests.oracle import dead_in_script, dead_names

HIT = "using the cached result"

SCRIPT = """\
import tensorflow as tf

{reader}
w = tf.Variable(1.0, name="w")


def loss():
    return (tf.stop_gradient(w) if frozen else w) * 2.0
"""

# How each script reads `frozen` from SETTINGS, and how the test writes it there.
READERS = {
    "sqlite3": (
        "import sqlite3\n"
        'frozen = sqlite3.connect(r"{settings}").execute("select v from s").fetchone()[0]\n'
    ),
    "h5py": (
        "import h5py\n"
        'with h5py.File(r"{settings}", "r") as f:\n    frozen = int(f.attrs["frozen"])\n'
    ),
    "tf.io.gfile": 'frozen = int(tf.io.gfile.GFile(r"{settings}").read())\n',
    "tf.io.read_file": 'frozen = int(tf.io.read_file(r"{settings}").numpy())\n',
    "tf.data": ('frozen = int(next(iter(tf.data.TextLineDataset([r"{settings}"]))).numpy())\n'),
    "subprocess": (
        "import subprocess\n"
        'frozen = int(subprocess.run(["cat", r"{settings}"], capture_output=True).stdout)\n'
    ),
}


def _write_setting(reader: str, settings: Path, frozen: int) -> None:
    if reader == "sqlite3":
        import sqlite3

        with sqlite3.connect(settings) as database:
            database.execute("create table if not exists s(v)")
            database.execute("delete from s")
            database.execute("insert into s values (?)", (frozen,))
        database.close()
    elif reader == "h5py":
        import h5py

        with h5py.File(settings, "a") as file:
            file.attrs["frozen"] = frozen
    else:
        settings.write_text(str(frozen))


TOLD = ("sqlite3", "h5py", "tf.io.gfile", "tf.io.read_file")
UNTOLD = ("subprocess", "tf.data")


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readers: dict[str, Path]) -> Path:
    """A script whose `frozen` is the largest setting its readers read, each from its file."""
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    lines, names = [], []
    for index, (reader, settings) in enumerate(readers.items()):
        settings.parent.mkdir(exist_ok=True)
        _write_setting(reader, settings, 0)
        code = READERS[reader].format(settings=settings)
        lines.append(
            code.replace("frozen =", f"frozen_{index} =").replace("frozen ", f"frozen_{index} ")
        )
        names.append(f"frozen_{index}")
    lines.append(f"frozen = max({', '.join(names)}, 0)\n")
    script = project / "model.py"
    script.write_text(SCRIPT.format(reader="".join(lines)))
    monkeypatch.chdir(project)
    return script


def _check(script: Path) -> tuple[set[str], bool]:
    code, stdout, stderr = invoke(command, [script, "--loss", "loss"])
    assert code in (0, 1), stderr
    return ({"w"} if code == 1 else set()), HIT in stderr


def test_settings_read_in_c_code_invalidate_the_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outside the folders gradcheck watches, each read gradcheck is told of (SQLite's, h5py's,
    # tf.io.gfile's, tf.io.read_file's); beside the script, a kernel's read the watch sees.
    readers = {
        reader: tmp_path / "outside" / f"{index}.setting" for index, reader in enumerate(TOLD)
    }
    script = _project(tmp_path, monkeypatch, readers)
    beside = tmp_path / "project" / "data" / "beside.setting"
    beside.parent.mkdir()
    beside.write_text("0")
    with script.open("a") as file:  # a read the watch, not the kernels' door, records
        file.write(f'\nfrozen = max(frozen, int(tf.io.read_file(r"{beside}").numpy()))\n')
    assert _check(script) == (set(), False)
    assert _check(script) == (set(), True)  # unchanged: answered from the cache
    for reader, settings in readers.items():  # each change is seen: traced again
        _write_setting(reader, settings, 1)
        assert _check(script) == ({"w"}, False), reader
        _write_setting(reader, settings, 0)
    beside.write_text("1")
    assert _check(script) == ({"w"}, False)
    assert dead_names(dead_in_script(str(script), "loss")) == {"w"}


@pytest.mark.parametrize("reader", UNTOLD)
def test_a_read_gradcheck_cannot_see_leaves_no_entry(
    reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a program the script starts reads is not known, nor the files of a dataset built in
    # a graph (tf.data's own functions): the trace is never answered from the cache.
    script = _project(tmp_path, monkeypatch, {reader: tmp_path / "outside" / "setting"})
    assert _check(script) == (set(), False)
    assert _check(script) == (set(), False)


def test_a_tree_too_big_to_watch_whole_is_not_vouched_for(tmp_path: Path) -> None:
    for index in range(MAX_FOLDERS + 1):
        (tmp_path / f"f{index}").mkdir()
    assert not TreeWatch([str(tmp_path)]).opened().complete
    (tmp_path / "f0" / "x").write_text("")
    watch = TreeWatch([str(tmp_path / "f0")])
    (tmp_path / "f0" / "x").read_text()
    opened = watch.opened()
    assert opened.complete and opened.files_read == {str((tmp_path / "f0" / "x").resolve())}
