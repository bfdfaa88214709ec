"""Cache what the worker traced from a script or a Keras file while nothing it read changes.

A hit answers without starting a worker or importing TensorFlow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from gradcheck_cli.cache.file_reads import library_folders, unchanged
from gradcheck_cli.options import CACHE_DIR_VARIABLE, CheckOptions
from gradcheck_cli.version import __version__
from gradcheck_cli.worker.protocol import Job, Reads, WorkerRequest

if TYPE_CHECKING:
    from gradcheck_cli.worker.process import Answer

CACHED_JOBS = (Job.SCRIPT, Job.KERAS_FILE)
"""`gradcheck run` is not cached: a training script reads its data through TensorFlow's own
file system (tf.data, TFRecord), which no Python audit hook sees, and runs with its arguments."""
MAX_ENTRIES = 256
"""The cache keeps this many entries, the ones used last; a write removes the others."""
_FORMAT = 3  # bumped whenever an entry's layout (or a pickled class's module) changes
_ENTRIES = "traced"
# Options that shape only the parent's analysis or the way the worker runs, not what it traces;
# every other option is part of the key, so a new option is keyed until declared here.
_NOT_KEYED = frozenset(
    {"allow_dead", "all_cuts", "sum_loss", "timeout", "debug", "quiet", "progress", "cache"}
    | {"cache_dir"}
)
_METADATA_SUFFIXES = (".dist-info", ".egg-info")  # an installed distribution's metadata folder
# What TensorFlow and Keras read at import (in a warm launcher, before any recording), and what
# decides which module an import finds.
_KEYED_ENVIRONMENT = ("PYTHONPATH", "KERAS_BACKEND", "KERAS_HOME", "TF_USE_LEGACY_KERAS")
_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by gradcheck.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


@dataclass(frozen=True)
class _Entry:
    """One stored answer: what the worker read, and its result, pickled on its own so that a
    stale entry is told without unpickling the graph."""

    key: str
    reads: Reads
    result: bytes


def traced(request: WorkerRequest) -> Answer:
    """The worker's answer to a script or Keras file request: from the cache when the same
    request was answered before and nothing it read has changed, else from a worker (and then
    stored). Failures are never stored; a cache that cannot be read or written is passed by."""
    options = request.options
    if not options.cache or request.job not in CACHED_JOBS:
        from gradcheck_cli.worker.process import run_worker

        return run_worker(request)
    folder = cache_folder(options) / _ENTRIES
    key = cache_key(request)
    found = _lookup(folder, key)
    if found is not None:
        if not options.quiet:
            _say(
                f"gradcheck: {request.path.name}: nothing it read has changed since it was "
                "traced; using the cached result (--no-cache traces it again)"
            )
        return found
    # Imported only on a miss: a hit starts no worker and imports none of its machinery.
    from gradcheck_cli.worker.process import run_worker_recording

    result, reads = run_worker_recording(request)
    if reads is not None and reads.settled:
        _store(folder, _Entry(key, reads, pickle.dumps(result, pickle.HIGHEST_PROTOCOL)))
    return result


def cache_folder(options: CheckOptions) -> Path:
    """The options' `cache_dir`, else GRADCHECK_CACHE_DIR, else the platform's user cache folder
    (~/.cache/gradcheck on Linux, ~/Library/Caches/gradcheck on macOS)."""
    chosen = options.cache_dir or os.environ.get(CACHE_DIR_VARIABLE, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("gradcheck", appauthor=False))


def cache_key(request: WorkerRequest) -> str:
    """The entry's name: the job, the file, the options that change what the worker traces, the
    working folder, the interpreter, gradcheck's version and every installed distribution's
    (TensorFlow's, Keras's...): the library files the worker read are not hashed one by one."""
    options = {
        item.name: getattr(request.options, item.name)
        for item in fields(request.options)
        if item.name not in _NOT_KEYED
    }
    material = {
        "format": _FORMAT,
        "job": request.job.value,
        "path": str(request.path),
        "options": options,
        "cwd": os.getcwd(),
        "python": [sys.version, sys.executable, sys.prefix],
        "gradcheck": __version__,
        "installed": _installed(),
        "environment": {name: os.environ.get(name) for name in _KEYED_ENVIRONMENT},
    }
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _installed() -> dict[str, list[str]]:
    """Every installed distribution with its version, as the names of its metadata folders
    (`tensorflow-2.21.0.dist-info`, `keras-3.15.0.dist-info`, numpy's, ...) in each folder
    that packages are installed to: any install, upgrade or removal changes it. One listing per
    folder, where importlib.metadata would scan sys.path once per package asked."""
    _, libraries = library_folders()
    found = {}
    for folder in libraries:
        with contextlib.suppress(OSError):
            found[folder] = sorted(
                name for name in os.listdir(folder) if name.endswith(_METADATA_SUFFIXES)
            )
    return found


def _lookup(folder: Path, key: str) -> Answer | None:
    """The stored answer under `key` if every file it read is unchanged; anything unreadable,
    from another format or stale is a miss."""
    path = folder / f"{key}.pickle"
    try:
        with path.open("rb") as stored:
            entry = pickle.load(stored)
        if not isinstance(entry, _Entry) or entry.key != key or not unchanged(entry.reads):
            return None
        result: Answer = pickle.loads(entry.result)
        os.utime(path)  # used now: the last to be pruned
    except Exception:  # a corrupt, truncated or foreign entry: trace again
        return None
    return result


def _store(folder: Path, entry: _Entry) -> None:
    """Write the entry whole under a temporary name, then give it its own, so a reader never
    sees half of it; then keep only the MAX_ENTRIES used last."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        tag = folder.parent / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text(_TAG)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".partial")
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as partial:
            pickle.dump(entry, partial, pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, folder / f"{entry.key}.pickle")
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return
    _prune(folder)


def _prune(folder: Path) -> None:
    entries = []
    for path in folder.glob("*.pickle"):
        with contextlib.suppress(OSError):
            entries.append((path.stat().st_mtime_ns, path))
    entries.sort(reverse=True)
    for _, path in entries[MAX_ENTRIES:]:
        with contextlib.suppress(OSError):
            path.unlink()


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
