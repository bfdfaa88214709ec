"""Cache what the worker traced from a script or a Keras file while nothing it read changes.

A hit answers without starting a worker or importing TensorFlow.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import stat
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from gradcheck_cli.cache import entry_codec
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
_FORMAT = 5  # bumped whenever an entry's layout (or a stored class's fields) changes
_ENTRIES = "entries"  # the folder of gradcheck's own, under the cache folder
# The only files gradcheck reads, writes or prunes there: its own entries, by their key.
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json")
_PARTIAL_NAME = re.compile(r"\.[A-Za-z0-9_]{8}\.partial")  # tempfile.mkstemp's, as _store asks
_ABANDONED_NANOSECONDS = 3600 * 10**9
_KEY_FILE = "entry-key"  # the user's secret that signs entries, in the user's own cache folder
# Options that shape only the parent's analysis or the way the worker runs, not what it traces;
# every other option is part of the key, so a new option is keyed until declared here.
_NOT_KEYED = frozenset(
    {"allow_dead", "all_cuts", "sum_loss", "timeout", "debug", "quiet", "progress", "cache"}
    | {"cache_dir", "memory_limit", "model_map"}
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


def traced(request: WorkerRequest) -> tuple[Answer, bool]:
    """The worker's answer to a script or Keras file request, and whether it came from the
    cache: it does when the same request was answered before and nothing it read has changed,
    else it comes from a worker (and is then stored). Failures are never stored; a cache that
    cannot be read or written is passed by. The caller tells a cached answer (`tell_cached`)
    once it made a report of it: a refusal of the answer is one line, cached or not."""
    options = request.options
    if not options.cache or request.job not in CACHED_JOBS or request.sources:
        from gradcheck_cli.worker.process import run_worker

        return run_worker(request), False
    folder = cache_folder(options) / _ENTRIES
    # A cache folder that is not the user's alone, or no key to sign with: passed by.
    try:
        secret = _secret() if _private_folder(folder) else None
    except OSError as error:  # a full disk: the check goes on without the cache
        _cache_unwritable(error)
        secret = None
    key = cache_key(request)
    found = _lookup(folder, key, secret) if secret is not None else None
    if found is not None:
        return found, True
    # Imported only on a miss: a hit starts no worker and imports none of its machinery.
    from gradcheck_cli.worker.process import run_worker_recording

    result, reads = run_worker_recording(request)
    if secret is not None and reads is not None and reads.settled:
        failure = _store(folder, key, secret, reads, result)
        if failure is not None:
            _cache_unwritable(failure)
    return result, False


def _cache_unwritable(error: OSError) -> None:
    reason = (error.strerror or str(error)).lower()
    _say(f"gradcheck: warning: the cache cannot be written ({reason}); checked without it")


def tell_cached(request: WorkerRequest) -> None:
    """Say on stderr that the report comes from the cache (not with --quiet)."""
    if not request.options.quiet:
        _say(
            f"gradcheck: {request.path.name}: nothing it read has changed since it was "
            "traced; using the cached result (--no-cache traces it again)"
        )


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


def _private_folder(folder: Path) -> bool:
    """Whether `folder` is gradcheck's to use: created 0700 if missing; an existing one must be
    a real folder (no symlink) that the user owns and no one else can write (made 0700 if only
    its mode is too open). Another user's folder, or one that others can change, is never
    read: its entries could have been planted."""
    try:
        _make_private(folder)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
        parent = os.stat(folder.parent)
        if parent.st_uid not in (os.getuid(), 0) or (
            parent.st_mode & stat.S_IWOTH and not parent.st_mode & stat.S_ISVTX
        ):
            return False
    except OSError:
        return False
    return True


def _make_private(folder: Path) -> None:
    """Make `folder` and each missing folder above it, each 0700 whatever the umask (under
    umask 000, makedirs would make the ones above 0777)."""
    missing = []
    for level in (folder, *folder.parents):
        if os.path.lexists(level):
            break
        missing.append(level)
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another gradcheck made it meanwhile
            os.mkdir(level, 0o700)
            os.chmod(level, 0o700)


def _secret() -> bytes | None:
    """The key that signs the user's entries, in the user's own cache folder (GRADCHECK_CACHE_DIR
    or the platform's, whatever a config's `cache-dir` says): an entry a repository planted,
    even under its own `cache-dir`, has no valid signature. Created on first use, readable by
    the user only."""
    chosen = os.environ.get(CACHE_DIR_VARIABLE, "").strip()  # the user's own choice
    if chosen:
        home = Path(chosen).expanduser()
    else:
        import platformdirs

        home = Path(platformdirs.user_cache_dir("gradcheck", appauthor=False))
    if not _private_folder(home):
        return None
    path = home / _KEY_FILE
    try:
        key = _read_key(path)
        if key is None or len(key) != 32:  # none yet, or a damaged one (a full disk's)
            _new_key(home, path, replace=key is not None)
            key = _read_key(path)
    except PermissionError:  # not the user's own private file: the cache is passed by
        return None
    return key if key is not None and len(key) == 32 else None


def _read_key(path: Path) -> bytes | None:
    """The stored key's bytes (damaged ones too, to be replaced), None when there is none; an
    OSError when it is not the user's own private regular file."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(descriptor, "rb") as stored:
        info = os.fstat(stored.fileno())
        if info.st_uid != os.getuid() or info.st_mode & 0o077 or not stat.S_ISREG(info.st_mode):
            raise PermissionError(f"{path} is not a private file of the user's")
        return stored.read(64)


def _new_key(home: Path, path: Path, *, replace: bool) -> None:
    """Write a new key whole under a temporary name, then give it the key's name: `replace`
    a damaged one, else only if none is there (a key another gradcheck made first wins)."""
    import tempfile

    descriptor, temporary = tempfile.mkstemp(dir=home, prefix=".key.", suffix=".partial")
    try:
        with os.fdopen(descriptor, "wb") as new:
            new.write(os.urandom(32))
            new.flush()
            os.fsync(new.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _signature(secret: bytes, body: bytes) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def _lookup(folder: Path, key: str, secret: bytes) -> Answer | None:
    """The stored answer under `key` if gradcheck signed it for this user and every file it
    read is unchanged; anything unreadable, unsigned, from another format or stale is a miss."""
    path = folder / f"{key}.json"
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as stored:
            if not stat.S_ISREG(os.fstat(stored.fileno()).st_mode):
                return None
            signature, _, body = stored.read().partition(b"\n")
        if not hmac.compare_digest(signature.decode("ascii"), _signature(secret, body)):
            return None
        entry = json.loads(body)
        if entry.get("format") != _FORMAT or entry.get("key") != key:
            return None
        reads = entry_codec.loads(entry["reads"])
        if not isinstance(reads, Reads) or not unchanged(reads):
            return None
        result: Answer = entry_codec.loads(entry["result"])
        os.utime(path)  # used now: the last to be pruned
    except Exception:  # a corrupt, truncated or foreign entry: trace again
        return None
    return result


def _store(folder: Path, key: str, secret: bytes, reads: Reads, result: Answer) -> OSError | None:
    """Write the entry whole under a temporary name, then give it its own, so a reader never
    sees half of it; then keep only the MAX_ENTRIES used last. The error that kept it from
    being written, if one did."""
    import tempfile

    try:
        entry = {
            "format": _FORMAT,
            "key": key,
            "reads": entry_codec.dumps(reads),
            "result": entry_codec.dumps(result),
        }
    except entry_codec.EntryError:  # a result gradcheck does not know how to store
        return None
    body = json.dumps(entry).encode("utf-8")
    try:
        _tag(folder)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".partial")
    except OSError as error:
        return error
    try:
        with os.fdopen(handle, "wb") as partial:
            partial.write(_signature(secret, body).encode("ascii") + b"\n" + body)
        os.replace(temporary, folder / f"{key}.json")
    except BaseException as error:  # a full disk, or SIGTERM / Ctrl-C (`Stopped`) meanwhile
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            return error
        raise
    _prune(folder)
    return None


def _tag(folder: Path) -> None:
    """CACHEDIR.TAG in gradcheck's own folder (backup tools skip it), never through a link."""
    try:
        descriptor = os.open(
            folder / "CACHEDIR.TAG", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
        )
    except OSError:  # there already, or not ours to write
        return
    with os.fdopen(descriptor, "w") as tag:
        tag.write(_TAG)


def _prune(folder: Path) -> None:
    """Keep the MAX_ENTRIES entries used last; only files named as gradcheck names them."""
    entries = []
    # A partial entry a killed gradcheck left (SIGKILL gives no time to remove it); a younger
    # one may be another gradcheck's, still being written.
    abandoned = time.time_ns() - _ABANDONED_NANOSECONDS
    with contextlib.suppress(OSError):
        for item in os.scandir(folder):
            if not item.is_file(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                changed = item.stat(follow_symlinks=False).st_mtime_ns
                if _ENTRY_NAME.fullmatch(item.name):
                    entries.append((changed, item.path))
                elif _PARTIAL_NAME.fullmatch(item.name) and changed < abandoned:
                    os.unlink(item.path)
    entries.sort(reverse=True)
    for _, path in entries[MAX_ENTRIES:]:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
