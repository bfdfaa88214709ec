"""A Keras file read without Keras: its sizes, checked before Keras opens it, and what it says
of itself (the Keras that wrote it, the loss it was compiled with).

A 19 KB `.keras` archive may declare a config.json that inflates to half a gigabyte, which Keras
reads whole into memory (its own guard starts at 4 GiB), and a kilobyte of HDF5 may hold a
gzip-compressed dataset of gigabytes. `check_keras_archive` reads only the zip's directory and,
streamed under their cap, the small members Keras parses whole; it runs in gradcheck's own
process. `check_weight_datasets` opens HDF5 (a C library reading crafted input), so it runs in
the worker, before Keras, as do the readers of what a file says of itself."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.options import memory_text

MAX_MEMBERS = 10_000
"""A saved model has a few members (config.json, metadata.json, the weights, some assets)."""

MAX_PARSED_BYTES = 64 * 2**20
"""The most a member that Keras parses whole (its JSON) may inflate to: a model's config is
kilobytes, a few megabytes for thousands of layers."""

PARSED_MEMBERS = frozenset({"config.json", "metadata.json"})

MAX_EXPANSION = 100
"""How many times its stored size a member may inflate to, past MIN_SUSPECT_BYTES: Keras stores
members uncompressed, and weights compress little; a higher ratio is a decompression bomb."""

MIN_SUSPECT_BYTES = 2**20

_READ_BYTES = 2**20


def check_keras_archive(path: Path) -> None:
    """Refuse, in one GradcheckError, a `.keras` zip whose members would cost more memory than
    a saved model can need. A file that is not a zip is left to Keras, which says so."""
    try:
        if not zipfile.is_zipfile(path):
            return
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_MEMBERS:
                raise _refused(path, f"holds {len(members)} members (at most {MAX_MEMBERS})")
            for member in members:
                _check_declared(path, member)
            for member in members:
                if member.filename in PARSED_MEMBERS:
                    _check_inflated(path, archive, member)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as error:
        raise _refused(path, f"is a damaged zip archive ({error})") from None
    except OSError as error:
        shown = display_path(path)
        raise GradcheckError(f"cannot read {shown}: {error.strerror or error}") from None


def _check_declared(path: Path, member: zipfile.ZipInfo) -> None:
    """The sizes the zip's directory declares for `member`."""
    name, size = member.filename, member.file_size
    parts = name.replace("\\", "/").split("/")
    if name.startswith("/") or ".." in parts or "\0" in name or ":" in parts[0]:
        raise _refused(path, f"names a member outside the archive ({name!r})")
    if name in PARSED_MEMBERS and size > MAX_PARSED_BYTES:
        limit = memory_text(MAX_PARSED_BYTES)
        raise _refused(path, f"declares a {name} of {memory_text(size)} (at most {limit})")
    if size > MIN_SUSPECT_BYTES and size > MAX_EXPANSION * max(member.compress_size, 1):
        raise _refused(
            path,
            f"declares that its member {name} inflates from {memory_text(member.compress_size)} to "
            f"{memory_text(size)}, a decompression bomb (more than {MAX_EXPANSION} times)",
        )


def _check_inflated(path: Path, archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> None:
    """Inflate `member` in bounded reads: what it holds, not only what the directory says (a
    lying size or checksum is found here, before Keras reads it whole)."""
    inflated = 0
    with archive.open(member) as stream:
        while chunk := stream.read(_READ_BYTES):
            inflated += len(chunk)
            if inflated > MAX_PARSED_BYTES:
                raise _refused(
                    path, f"has a {member.filename} over {memory_text(MAX_PARSED_BYTES)}"
                )


WEIGHTS_MEMBER = "model.weights.h5"


def check_weight_datasets(path: Path) -> None:
    """Refuse a `.h5` file, or a `.keras` archive's weights, holding an HDF5 dataset that
    would inflate past MAX_EXPANSION times what the file stores for it (a compressed or
    never-written dataset of gigabytes)."""
    import h5py

    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                if WEIGHTS_MEMBER not in archive.namelist():
                    return
                with archive.open(WEIGHTS_MEMBER) as stream:
                    _check_datasets(path, stream)
        elif h5py.is_hdf5(path):
            _check_datasets(path, path)
    except GradcheckError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise _refused(path, f"has weights HDF5 cannot read ({error})") from None


def _check_datasets(path: Path, source: Path | IO[bytes]) -> None:
    import h5py

    with h5py.File(source, "r") as weights:
        for name, dataset in _datasets(path, weights):
            inflated = dataset.size * dataset.dtype.itemsize
            stored = dataset.id.get_storage_size()
            if inflated > MIN_SUSPECT_BYTES and inflated > MAX_EXPANSION * max(stored, 1):
                raise _refused(
                    path,
                    f"holds a weight ({name}) that inflates from {memory_text(stored)} to "
                    f"{memory_text(inflated)}, a decompression bomb (more than "
                    f"{MAX_EXPANSION} times)",
                )


def _datasets(path: Path, group: Any) -> Iterator[tuple[str, Any]]:
    """Every dataset under `group` by its hard links, walked without recursion (a file may nest
    groups deep), each group once; a link into another file is refused (Keras writes none)."""
    import h5py

    pending, seen = [group], {group.id}
    while pending:
        current = pending.pop()
        for name in current:
            link = current.get(name, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                where = f"{current.name.rstrip('/')}/{name}"
                raise _refused(path, f"links its weight {where} to another file ({link.filename})")
            if not isinstance(link, h5py.HardLink):
                continue
            item = current[name]
            if isinstance(item, h5py.Dataset):
                yield item.name, item
            elif isinstance(item, h5py.Group) and item.id not in seen:
                seen.add(item.id)
                pending.append(item)


def _refused(path: Path, why: str) -> GradcheckError:
    return GradcheckError(
        f"{display_path(path)} {why}: not a model Keras saved; gradcheck does not load it"
    )


def written_version(path: Path) -> str | None:
    """The Keras version `path` names as its writer (a `.keras` archive's metadata.json, a
    `.h5` file's attribute), or None."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                if "metadata.json" in archive.namelist():
                    version = json.loads(archive.read("metadata.json")).get("keras_version")
                    return str(version) if version is not None else None
            return None
        import h5py

        with h5py.File(path, "r") as file:
            version = file.attrs.get("keras_version")
        return version.decode() if isinstance(version, bytes) else str(version) if version else None
    except (OSError, ValueError, KeyError, AttributeError):
        return None


def mentions(path: Path, word: bytes) -> bool:
    """Whether the model config of `path` names `word` (read bounded: configs are small)."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return word in archive.read("config.json")
        import h5py

        with h5py.File(path, "r") as file:
            config = file.attrs.get("model_config", b"")
        return word in (config if isinstance(config, bytes) else str(config).encode())
    except (OSError, ValueError, KeyError):
        return False


@dataclass(frozen=True)
class CompiledLoss:
    """The loss (one, or one per output as a list or dict) and loss weights a file's compile
    information names: an `.h5` file's `training_config` attribute, a `.keras` archive's
    `compile_config` in config.json."""

    loss: Any
    loss_weights: Any


def compiled_loss(path: Path) -> CompiledLoss | None:
    """The compiled loss `path` names, or None when it names none (saved uncompiled, or
    compiled without a loss) or cannot be read."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                config = json.loads(archive.read("config.json")).get("compile_config")
        else:
            import h5py

            with h5py.File(path, "r") as file:
                text = file.attrs.get("training_config")
            config = json.loads(text) if text is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(config, dict) or config.get("loss") is None:
        return None
    return CompiledLoss(config["loss"], config.get("loss_weights"))


class UnresolvedLoss(Exception):
    """A compiled loss that `keras.losses.get` cannot resolve; `named`: its name, or None
    when the file names no loss at all."""

    def __init__(self, named: str | None) -> None:
        super().__init__(named)
        self.named = named


def resolved_loss(keras: Any, config: Any) -> Any:
    """The Keras losses of `config`, in its structure (a list or dict per output), each resolved
    as `--loss` is, by `keras.losses.get`; UnresolvedLoss when one cannot be. An output's
    None stays None: that output has no loss."""
    if config is None:
        return None
    config = _named_function(config)
    if isinstance(config, str) or (isinstance(config, dict) and "class_name" in config):
        try:
            return keras.losses.get(config)
        except Exception:  # Keras's words for an unknown name or class vary by version
            raise UnresolvedLoss(loss_words(config)) from None
    if isinstance(config, dict):
        return {key: resolved_loss(keras, value) for key, value in config.items()}
    if isinstance(config, (list, tuple)):
        return [resolved_loss(keras, value) for value in config]
    raise UnresolvedLoss(loss_words(config))


def _named_function(config: Any) -> Any:
    """A loss saved as a Python function (`class_name` "function") is saved by its name only."""
    if isinstance(config, dict) and config.get("class_name") == "function":
        return str(config.get("config"))
    return config


def loss_words(config: Any) -> str:
    """The compiled loss as the report's header names it: `mse`, `[mse, mae]`,
    `{out0: mse, out1: mae}`, `MeanSquaredError`."""
    config = _named_function(config)
    if isinstance(config, dict) and "class_name" in config:
        return str(config["class_name"])
    if isinstance(config, dict):
        return "{" + ", ".join(f"{key}: {loss_words(value)}" for key, value in config.items()) + "}"
    if isinstance(config, (list, tuple)):
        return "[" + ", ".join(loss_words(value) for value in config) + "]"
    return str(config)
