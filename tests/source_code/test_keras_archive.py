"""A crafted Keras file costs a bounded amount of memory: a decompression bomb, a lying zip or
an HDF5 link to another file is refused in one line before Keras opens it."""

from __future__ import annotations

import json
import resource
import zipfile
from pathlib import Path

import pytest

from gradcheck_cli.cli import ExitCode, command
from tests.cli_runs import cli_result


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small model as Keras writes it, in both formats."""
    import keras

    where = tmp_path_factory.mktemp("saved")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="dense")])
    model.compile(optimizer="sgd", loss="mse")
    model.save(where / "model.keras")
    model.save(where / "model.h5")
    return {"keras": where / "model.keras", "h5": where / "model.h5"}


def _rewritten(
    source: Path, target: Path, replace: dict[str, bytes], compression: int = zipfile.ZIP_STORED
) -> Path:
    """`source`'s members, those named in `replace` with new contents, into `target`."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", compression) as copy:
        for name in original.namelist():
            copy.writestr(name, replace.get(name, original.read(name)))
    return target


def _config_bomb(saved: Path, target: Path) -> Path:
    """config.json padded with half a gigabyte of spaces: 0.5 GiB inflated, kilobytes stored."""
    with zipfile.ZipFile(saved) as original:
        config = original.read("config.json").rstrip(b"}")
    with (
        zipfile.ZipFile(saved) as original,
        zipfile.ZipFile(target, "w", zipfile.ZIP_BZIP2) as copy,
    ):
        for name in original.namelist():
            if name != "config.json":
                copy.writestr(name, original.read(name))
                continue
            with copy.open("config.json", "w", force_zip64=True) as member:
                member.write(config)
                for _ in range(32):
                    member.write(b" " * 2**24)
                member.write(b"}")
    return target


def _weights_bomb(weights: Path) -> None:
    """A gzip-compressed dataset of a gigabyte of zeros added to an HDF5 weights file."""
    import h5py

    with h5py.File(weights, "a") as file:
        file.create_dataset(
            "extra", shape=(2**28,), dtype="float32", compression="gzip", chunks=(2**20,)
        )


def _bad_checksum(saved: Path, target: Path) -> Path:
    """config.json's CRC in the zip's central directory changed: its contents do not match."""
    data = bytearray(saved.read_bytes())
    header = data.index(b"PK\x01\x02")
    while True:
        name_length = int.from_bytes(data[header + 28 : header + 30], "little")
        if data[header + 46 : header + 46 + name_length] == b"config.json":
            break
        header = data.index(b"PK\x01\x02", header + 4)
    data[header + 16] ^= 0xFF
    target.write_bytes(bytes(data))
    return target


def _assert_refused(path: Path, *expected: str) -> None:
    result = cli_result(command, [str(path), "--no-cache"])
    assert result.exit_code == ExitCode.ERROR, result.stdout
    assert result.stdout == ""
    ours = [line for line in result.stderr.splitlines() if line.startswith("gradcheck:")]
    assert len(ours) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for text in expected:
        assert text in ours[0], ours[0]


def test_a_config_bomb_is_refused_from_the_zip_directory(saved: dict[str, Path], tmp_path: Path):
    bomb = _config_bomb(saved["keras"], tmp_path / "bomb.keras")
    assert bomb.stat().st_size < 64 * 1024  # kilobytes that declare half a gigabyte
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _assert_refused(bomb, "config.json of 512 MiB", "does not load it")
    # Refused in gradcheck's own process from the zip's directory: its peak did not grow by
    # anything near the member's size (ru_maxrss is in KiB).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024


def test_a_member_that_inflates_a_hundredfold_is_refused(saved: dict[str, Path], tmp_path: Path):
    with zipfile.ZipFile(saved["keras"]) as original:
        weights = original.read("model.weights.h5")
    padded = weights + bytes(8 * 2**20)  # zeros deflate to almost nothing
    bomb = _rewritten(
        saved["keras"],
        tmp_path / "deflated.keras",
        {"model.weights.h5": padded},
        zipfile.ZIP_DEFLATED,
    )
    _assert_refused(bomb, "model.weights.h5 inflates from", "decompression bomb")


def test_a_member_whose_checksum_lies_is_refused(saved: dict[str, Path], tmp_path: Path):
    _assert_refused(_bad_checksum(saved["keras"], tmp_path / "lying.keras"), "damaged zip")


def test_an_archive_of_many_members_is_refused(saved: dict[str, Path], tmp_path: Path):
    crowded = _rewritten(saved["keras"], tmp_path / "crowded.keras", {})
    with zipfile.ZipFile(crowded, "a") as archive:
        for index in range(10_001):
            archive.writestr(f"assets/{index}", b"")
    _assert_refused(crowded, "members (at most 10000)")


def test_a_weights_bomb_is_refused_before_keras_reads_it(saved: dict[str, Path], tmp_path: Path):
    import shutil

    legacy = tmp_path / "bomb.h5"
    shutil.copy(saved["h5"], legacy)
    _weights_bomb(legacy)
    weights = tmp_path / "model.weights.h5"
    with zipfile.ZipFile(saved["keras"]) as original:
        weights.write_bytes(original.read("model.weights.h5"))
    _weights_bomb(weights)
    archive = _rewritten(
        saved["keras"], tmp_path / "bomb.keras", {"model.weights.h5": weights.read_bytes()}
    )
    for bomb in (legacy, archive):
        _assert_refused(bomb, "holds a weight (/extra)", "to 1 GiB", "decompression bomb")


def test_a_weight_linked_to_another_file_is_refused(saved: dict[str, Path], tmp_path: Path):
    import shutil

    import h5py

    linked = tmp_path / "linked.h5"
    shutil.copy(saved["h5"], linked)
    with h5py.File(linked, "a") as file:
        file["model_weights/elsewhere"] = h5py.ExternalLink("/etc/passwd", "/")
    _assert_refused(linked, "links its weight /model_weights/elsewhere to another file")


def test_the_files_keras_wrote_are_still_checked(saved: dict[str, Path], tmp_path: Path):
    # The guards refuse nothing Keras itself writes: the archive stores its members as they
    # are, and a config of a few kilobytes is far below the cap.
    result = cli_result(command, [str(saved["keras"]), "--no-cache", "-f", "json"])
    assert result.exit_code == ExitCode.CLEAN, result.stderr
    import keras
    import tensorflow as tf

    # TensorFlow's tape over the objective fit() minimises, on the model the file holds.
    model = keras.saving.load_model(saved["keras"])
    x, y = tf.ones([4, 3]), tf.ones([4, 2])
    with tf.GradientTape() as tape:
        value = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
    gradients = tape.gradient(value, model.trainable_variables)
    tensorflow = {
        w.path: "ok" if g is not None else "dead"
        for w, g in zip(model.trainable_variables, gradients)
    }
    variables = json.loads(result.stdout)["variables"]
    assert {v["name"]: v["status"] for v in variables} == tensorflow
    assert set(tensorflow) == {"dense/kernel", "dense/bias"}


@pytest.mark.parametrize("member", ["../../escaped.py", "/etc/cron.d/job", "assets\\..\\..\\x"])
def test_a_member_named_outside_the_archive_is_refused(
    member: str, saved: dict[str, Path], tmp_path: Path
) -> None:
    crafted = _rewritten(saved["keras"], tmp_path / "traversal.keras", {})
    with zipfile.ZipFile(crafted, "a") as archive:
        archive.writestr(member, b"print('ran')\n")
    _assert_refused(crafted, "names a member outside the archive")
    assert not (tmp_path.parent / "escaped.py").exists()
