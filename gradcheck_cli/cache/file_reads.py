"""Record what the user's code read in the worker, and tell whether it is still as it was read.

The files it opened and the folders it listed come from an audit hook, and what C code opened
in the user's folders (which no audit event tells) from an inotify watch on them; the
environment variables from a watch on os.environ. The standard library's and installed
packages' own files are left to the cache key's versions.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.abc
import importlib.util
import os
import site
import stat
import sys
import sysconfig
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from gradcheck_cli.cache.unseen_reads import TreeWatch
from gradcheck_cli.worker.protocol import FileRead, ReadKind, Reads

# A file whose modification time lies this close to the recording may have changed again within
# the same clock tick without its time or size changing: its content is hashed at every check.
_RACY_NANOSECONDS = 2_000_000_000
_PSEUDO_FILESYSTEMS = ("/proc/", "/sys/", "/dev/")
# gradcheck sets these for the worker itself, so the worker sees values the parent's environment
# does not hold (or holds per launch): they say nothing about the user's model.
_SET_FOR_THE_WORKER = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "PYTHONUNBUFFERED")
_OWN_VARIABLE_PREFIXES = ("GRADCHECK_", "PYTEST_")
# Audit events of a job that starts another program (or a copy of itself): what that one reads
# goes unrecorded, so the trace is not cached.
_STARTS_A_PROGRAM = frozenset(
    {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork"}
    | {"os.forkpty", "pty.spawn"}
)


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

    def __init__(self, folders: Iterable[str | os.PathLike[str]] = ()) -> None:
        """`folders`: the user's folders, watched for what C code opens in them."""
        self.folders = tuple(os.fspath(folder) for folder in folders)
        self.watch: TreeWatch | None = None
        # Every path an audit event told (the job's, libraries'): an open the watch saw that is
        # not among them was made by C code.
        self.audited: set[str] = set()
        self.audited_listings: set[str] = set()
        self.unseeable = False  # the job started a program: what it read is unknown
        self.standard, self.libraries = library_folders()
        self.opened: dict[str, tuple[int, int] | None] = {}  # path -> (mtime_ns, size) at open
        self.written: set[str] = set()  # made by the job itself (autograph's modules, temp files)
        self.listed: set[str] = set()
        self.environment: dict[str, str | None] = {}
        self.assigned: set[str] = set()  # variables the code set itself

    def start(self) -> None:
        if self.folders:
            self.watch = TreeWatch(self.folders)
        sys.addaudithook(self._audit)
        self._watch_environment()
        self._watch_hdf5()
        after_import("tensorflow.python.lib.io._pywrap_file_io", self._watch_tensorflow_files)

    def told_read(self, path: str) -> None:
        """A file that C code read, told by whoever knows (TensorFlow's kernels' watch)."""
        path = os.path.abspath(path)
        self.audited.add(path)
        self._opened(path, 0)

    def sees(self, path: str) -> bool:
        """Whether an open of `path` by C code would be seen by the watch on the folders."""
        return self.watch is not None and self.watch.covers(path)

    def _watch_tensorflow_files(self, io: Any) -> None:
        """TensorFlow's file system (tf.io.gfile, what Keras and checkpoints read through it)
        opens files in C++: its Python door is patched to tell the paths."""
        recorder = self

        def reading(open_: Any) -> Any:
            def told(name: Any, *args: Any, **kwargs: Any) -> Any:
                recorder._told_by_tensorflow(name, listing=False)
                return open_(name, *args, **kwargs)

            return told

        def listing(list_: Any) -> Any:
            def told(name: Any, *args: Any, **kwargs: Any) -> Any:
                recorder._told_by_tensorflow(name, listing=True)
                return list_(name, *args, **kwargs)

            return told

        io.BufferedInputStream = reading(io.BufferedInputStream)
        io.GetChildren = listing(io.GetChildren)
        io.GetMatchingFiles = listing(io.GetMatchingFiles)

    def _told_by_tensorflow(self, name: Any, listing: bool) -> None:
        if not isinstance(name, (str, bytes)):
            return
        path = os.fsdecode(name)
        if "://" in path:  # another file system (gs://, s3://, ram://): nothing to hash here
            self.unseeable = True
            return
        path = os.path.abspath(path)
        if not listing:
            self.audited.add(path)
            self._opened(path, 0)
            return
        if glob.has_magic(path):  # GetMatchingFiles: the folder the pattern lists
            path = os.path.dirname(path)
            if glob.has_magic(path):  # a pattern over folders: too many to name
                self.unseeable = True
                return
        self.audited_listings.add(path)
        if is_user_file(os.path.join(path, ""), self.libraries):
            self.listed.add(path)

    def _watch_hdf5(self) -> None:
        """HDF5 opens its files in C, with no audit event: h5py's one door to it is patched to
        tell the path (TensorFlow imports h5py anyway, so importing it here costs nothing)."""
        try:
            from h5py._hl import files
        except ImportError:
            return
        make_fid = files.make_fid
        recorder = self

        def told(name: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
            if isinstance(name, (str, bytes)):
                path = os.path.abspath(os.fsdecode(name))
                if os.path.isfile(path):  # not a file object's placeholder name
                    recorder.audited.add(path)
                    written = mode in ("w", "w-", "x")
                    recorder._opened(path, os.O_WRONLY | os.O_CREAT if written else 0)
            return make_fid(name, mode, *args, **kwargs)

        files.make_fid = told

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        # Called for every audit event of the process (TensorFlow raises many): decide fast.
        if event == "open":
            path, _mode, flags = args
            if isinstance(path, (str, bytes)):
                path = os.path.abspath(os.fsdecode(path))
                self.audited.add(path)
                self._opened(path, flags or 0)
        elif event == "sqlite3.connect":  # SQLite opens the database in C
            database = args[0]
            if isinstance(database, (str, bytes, os.PathLike)) and os.fspath(database) not in (
                ":memory:",
                b":memory:",
                "",
            ):
                self._opened(os.path.abspath(os.fsdecode(database)), 0)
        elif event in _STARTS_A_PROGRAM and self._asked_by_user():
            # What another program reads, no hook of this process sees (the programs libraries
            # start, as TensorFlow's import runs `uname`, are theirs: covered by versions).
            self.unseeable = True
        elif event in ("os.listdir", "os.scandir"):
            folder = args[0]
            if isinstance(folder, int):
                return
            path = os.path.abspath(os.fsdecode(folder) if folder is not None else ".")
            self.audited_listings.add(path)
            if not self._asked_by_user(listing=True):
                return
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
        unseen_files, unseen_folders, whole = self._unseen()
        paths |= unseen_files
        files = [file_read(path) for path in sorted(paths)]
        files += [folder_read(path) for path in sorted(self.listed | unseen_folders)]
        # A file that changed after it was opened: the result may hold its old content.
        found = {f.path: (f.mtime_ns, f.size) if f.digest is not None else None for f in files}
        settled = (
            whole
            and not self.unseeable
            and all(found.get(path) == at for path, at in self.opened.items())
        )
        environment = tuple(sorted(self.environment.items()))
        return Reads(tuple(files), environment, settled=settled)

    def _unseen(self) -> tuple[set[str], set[str], bool]:
        """The files and folders C code opened in the user's folders (no audit event told
        them), and whether the watch vouches that nothing else went unseen: False when it could
        not watch every folder, lost an event, or a file C code read was also written."""
        if self.watch is None:
            return set(), set(), True
        opened = self.watch.opened()
        read = _not_among(opened.files_read, self.audited)
        read = {path for path in read if is_user_file(path, self.libraries)}
        whole = opened.complete and not read & opened.files_written
        return read, _not_among(opened.folders, self.audited_listings), whole


def after_import(name: str, patch: Callable[[ModuleType], None]) -> Callable[[], None]:
    """Call `patch` with module `name` once it is imported: now if it is, else right after its
    import executes it. Returns what cancels a `patch` still waiting for the import."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
        return lambda: None
    finder = _AfterImport(name, patch)
    sys.meta_path.insert(0, finder)

    def cancel() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)

    return cancel


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute, patch = spec.loader.exec_module, self.patch

        def exec_module(module: ModuleType) -> None:
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _not_among(watched: set[str], audited: set[str]) -> set[str]:
    """The `watched` paths (real ones) that no `audited` path (as the code named it) names;
    only audited paths with a watched path's base name are resolved."""
    left = watched - audited
    if not left:
        return left
    names = {os.path.basename(path) for path in left}
    return left - {os.path.realpath(p) for p in audited if os.path.basename(p) in names}


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
