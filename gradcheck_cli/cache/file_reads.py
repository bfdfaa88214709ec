"""Record what the user's code read in the worker, and tell whether it is still as it was read.

The files it opened and the folders it listed come from an audit hook, the environment
variables from a watch on os.environ; the standard library's and installed packages' own are
left to the cache key's versions.
"""

from __future__ import annotations

import hashlib
import os
import site
import stat
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gradcheck_cli.worker.protocol import FileRead, ReadKind, Reads

# A file whose modification time lies this close to the recording may have changed again within
# the same clock tick without its time or size changing: its content is hashed at every check.
_RACY_NANOSECONDS = 2_000_000_000
_PSEUDO_FILESYSTEMS = ("/proc/", "/sys/", "/dev/")
# gradcheck sets these for the worker itself, so the worker sees values the parent's environment
# does not hold (or holds per launch): they say nothing about the user's model.
_SET_FOR_THE_WORKER = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "PYTHONUNBUFFERED")
_OWN_VARIABLE_PREFIXES = ("GRADCHECK_", "PYTEST_")


def library_folders() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Where the standard library lives, and where it and installed packages live, each folder
    ending with a separator: their files are covered by the versions in the cache key, not
    hashed one by one."""
    paths = sysconfig.get_paths()
    standard = {paths["stdlib"], paths["platstdlib"]}
    installed = {paths["purelib"], paths["platlib"], site.getusersitepackages()}
    installed.update(site.getsitepackages())
    installed.add(os.path.dirname(paths["stdlib"]))  # python311.zip and lib-dynload beside it

    def ending(folders: set[str]) -> tuple[str, ...]:
        return tuple(sorted(os.path.join(os.path.realpath(f), "") for f in folders if f))

    return ending(standard), ending(standard | installed)


def is_user_file(path: str, libraries: tuple[str, ...]) -> bool:
    """Whether `path` (absolute) is the user's own: not the standard library, an installed
    package (an editable install outside site-packages is the user's), bytecode or /proc."""
    if path.startswith(libraries) or path.startswith(_PSEUDO_FILESYSTEMS):
        return False
    if "/site-packages/" in path or "/dist-packages/" in path:
        return False
    return not (path.endswith(".pyc") or "/__pycache__/" in path)


class Recorder:
    """Collects, from an audit hook installed once in the worker, the paths its code opens for
    reading and the folders it lists, and patches os.environ to see which variables it reads."""

    def __init__(self) -> None:
        self.standard, self.libraries = library_folders()
        self.opened: dict[str, tuple[int, int] | None] = {}  # path -> (mtime_ns, size) at open
        self.written: set[str] = set()  # made by the job itself (autograph's modules, temp files)
        self.listed: set[str] = set()
        self.environment: dict[str, str | None] = {}
        self.assigned: set[str] = set()  # variables the code set itself

    def start(self) -> None:
        sys.addaudithook(self._audit)
        self._watch_environment()

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        # Called for every audit event of the process (TensorFlow raises many): decide fast.
        if event == "open":
            path, _mode, flags = args
            if isinstance(path, (str, bytes)):
                self._opened(os.path.abspath(os.fsdecode(path)), flags or 0)
        elif event in ("os.listdir", "os.scandir"):
            folder = args[0]
            if isinstance(folder, int) or not self._asked_by_user(listing=True):
                return
            path = os.path.abspath(os.fsdecode(folder) if folder is not None else ".")
            if is_user_file(os.path.join(path, ""), self.libraries):
                self.listed.add(path)

    def _asked_by_user(self, listing: bool = False) -> bool:
        """Whether the code that asked (the first caller outside the standard library) is the
        user's. The import system lists every folder on sys.path: a file that appears there
        changes nothing unless it is imported, and then it is recorded as imported."""
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if listing and (name.startswith("<frozen importlib") or "/importlib/" in name):
                return False
            standard = name.startswith(self.standard) and "-packages/" not in name
            if not (name.startswith("<") or standard or name == __file__):
                return is_user_file(name, self.libraries)
            frame = frame.f_back  # type: ignore[assignment]
        return False

    def _opened(self, path: str, flags: int) -> None:
        if flags & (os.O_CREAT | os.O_TRUNC | os.O_APPEND) or flags & os.O_ACCMODE == os.O_WRONLY:
            # Made by the job before any read: its own output. A file read first stays an
            # input; writing it then makes the trace unsettled, never cached.
            if path not in self.opened:
                self.written.add(path)
            return
        if path in self.opened or path in self.written or not is_user_file(path, self.libraries):
            return
        try:
            status = os.stat(path)
        except OSError:
            self.opened[path] = None
        else:
            if not stat.S_ISDIR(status.st_mode):
                self.opened[path] = (status.st_mtime_ns, status.st_size)

    def _watch_environment(self) -> None:
        environ_type = type(os.environ)
        get, set_, delete = (
            environ_type.__getitem__,
            environ_type.__setitem__,
            environ_type.__delitem__,
        )
        recorder = self

        def getitem(environ: Any, key: str) -> str:
            try:
                value: str = get(environ, key)
            except KeyError:
                recorder._looked_up(key, None)
                raise
            recorder._looked_up(key, value)
            return value

        def setitem(environ: Any, key: str, value: str) -> None:
            recorder.assigned.add(key)
            set_(environ, key, value)

        def delitem(environ: Any, key: str) -> None:
            recorder.assigned.add(key)
            delete(environ, key)

        environ_type.__getitem__ = getitem  # type: ignore[method-assign]
        environ_type.__setitem__ = setitem  # type: ignore[method-assign]
        environ_type.__delitem__ = delitem  # type: ignore[method-assign]

    def _looked_up(self, key: str, value: str | None) -> None:
        """A variable the user's own code looks up (a library's are covered by its version)."""
        if key in self.assigned or key in self.environment or not isinstance(key, str):
            return
        if key.startswith(_OWN_VARIABLE_PREFIXES) or key in _SET_FOR_THE_WORKER:
            return
        if self._asked_by_user():
            self.environment[key] = value

    def reads(self, always: Iterable[Path] = ()) -> Reads:
        """What was read, every file hashed now: the files opened, the user's modules that are
        imported (a module loaded from its bytecode never opens its source), `always`."""
        modules = []
        for module in list(sys.modules.values()):
            try:
                # Not getattr: a lazy module (TensorFlow's) would import itself for it.
                source = vars(module).get("__file__")
            except TypeError:
                continue
            if isinstance(source, str):
                modules.append(os.path.abspath(source))
        paths = set(self.opened) | {os.path.abspath(p) for p in always}
        paths |= {p for p in modules if is_user_file(p, self.libraries)} - self.written
        files = [file_read(path) for path in sorted(paths)]
        files += [folder_read(path) for path in sorted(self.listed)]
        # A file that changed after it was opened: the result may hold its old content.
        found = {f.path: (f.mtime_ns, f.size) if f.digest is not None else None for f in files}
        settled = all(found.get(path) == at for path, at in self.opened.items())
        environment = tuple(sorted(self.environment.items()))
        return Reads(tuple(files), environment, settled=settled)


def file_read(path: str) -> FileRead:
    try:
        status = os.stat(path)
        if stat.S_ISDIR(status.st_mode):
            return folder_read(path)
        with open(path, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        return FileRead(path, ReadKind.FILE, None)
    return FileRead(path, ReadKind.FILE, digest, status.st_mtime_ns, status.st_size)


def folder_read(path: str) -> FileRead:
    try:
        names = sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return FileRead(path, ReadKind.FOLDER, None)
    digest = hashlib.sha256("\0".join(names).encode("utf-8", "surrogateescape")).hexdigest()
    return FileRead(path, ReadKind.FOLDER, digest)


def unchanged(reads: Reads) -> bool:
    """Whether every file and folder is as it was read (a file's time and size alone vouch for
    it unless they lie close to the recording), and every variable holds the value read."""
    for name, value in reads.environment:
        if os.environ.get(name) != value:
            return False
    for read in reads.files:
        try:
            if not _same(read, reads.recorded_ns):
                return False
        except OSError:
            return False
    return True


def _same(read: FileRead, recorded_ns: int) -> bool:
    if read.kind is ReadKind.FOLDER:
        return folder_read(read.path) == read
    try:
        status = os.stat(read.path)
    except (FileNotFoundError, NotADirectoryError):
        return read.digest is None
    if read.digest is None:
        return False
    if (
        (status.st_mtime_ns, status.st_size) == (read.mtime_ns, read.size)
        and status.st_mtime_ns < recorded_ns - _RACY_NANOSECONDS
        and stat.S_ISREG(status.st_mode)
    ):
        return True
    return file_read(read.path).digest == read.digest
