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


@pytest.mark.parametrize(
    ("reader", "where"),
    # Elsewhere, each reader as it is told (or not); beside, a kernel's read left to the watch.
    [(reader, "elsewhere") for reader in READERS] + [("tf.io.read_file", "beside")],
)
def test_a_setting_read_in_c_code_invalidates_the_entry(
    reader: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    project = tmp_path / "project"
    project.mkdir()
    # Beside the script, in the folders gradcheck watches, every open is seen; elsewhere, the
    # reads gradcheck is told of (SQLite's, h5py's, tf.io.gfile's, tf.io.read_file's). What a
    # program the script starts reads is not known, nor the files of a dataset built in a
    # graph (tf.data's own functions): no entry then.
    folder = project / "data" if where == "beside" else tmp_path / "outside"
    folder.mkdir()
    settings = folder / "settings"
    _write_setting(reader, settings, 0)
    script = project / "model.py"
    script.write_text(SCRIPT.format(reader=READERS[reader].format(settings=settings)))
    monkeypatch.chdir(project)
    told = reader not in ("subprocess", "tf.data")

    def check() -> tuple[set[str], bool]:
        code, stdout, stderr = invoke(command, [script, "--loss", "loss"])
        assert code in (0, 1), stderr
        return ({"w"} if code == 1 else set()), HIT in stderr

    assert check() == (set(), False)
    assert check() == (set(), told)  # unchanged: answered from the cache where it can tell
    _write_setting(reader, settings, 1)
    dead, hit = check()
    assert not hit
    assert dead == dead_names(dead_in_script(str(script), "loss")) == {"w"}


def test_a_tree_too_big_to_watch_whole_is_not_vouched_for(tmp_path: Path) -> None:
    for index in range(MAX_FOLDERS + 1):
        (tmp_path / f"f{index}").mkdir()
    assert not TreeWatch([str(tmp_path)]).opened().complete
    (tmp_path / "f0" / "x").write_text("")
    watch = TreeWatch([str(tmp_path / "f0")])
    (tmp_path / "f0" / "x").read_text()
    opened = watch.opened()
    assert opened.complete and opened.files_read == {str((tmp_path / "f0" / "x").resolve())}
