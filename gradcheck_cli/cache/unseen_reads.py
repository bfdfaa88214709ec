"""Reads no audit event tells: files the user's folders hold that C code opened (HDF5 through
h5py, SQLite, TensorFlow's own file system, a program the script started), seen through Linux's
inotify on those folders.

Python's audit hook sees `open`, `os.listdir` and `os.scandir` only; a verdict cached on what it
saw would be stale once such a file changed. Whatever a watch cannot vouch for (too many
folders to watch, a lost event, no inotify on this system) makes the trace uncacheable.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_FOLDERS = 2048
"""Folders watched at most; a bigger tree is not watched whole, and its trace is not cached."""

# Folders nobody keeps model inputs in, and that can be huge: tools', environments', caches'.
_PASSED_OVER = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})

_IN_CLOSE_WRITE = 0x08
_IN_CLOSE_NOWRITE = 0x10
_IN_OPEN = 0x20
_IN_Q_OVERFLOW = 0x4000
_IN_ISDIR = 0x40000000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_MASK = _IN_OPEN | _IN_CLOSE_WRITE | _IN_CLOSE_NOWRITE | _IN_ONLYDIR
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name


@dataclass
class Opened:
    """What the watch saw of the files and folders opened under the watched folders."""

    files_read: set[str] = field(default_factory=set)
    files_written: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    complete: bool = True  # False: a read may have gone unseen


class TreeWatch:
    """An inotify watch on every folder under `roots` (dot-folders and environments passed
    over), from its creation until `opened` is asked."""

    def __init__(self, roots: Iterable[str]) -> None:
        self._folders: dict[int, str] = {}
        self._watched: set[str] = set()
        self._pending = b""
        self.complete = True
        self._descriptor = -1
        try:
            # The process's own symbols, libc's among them (find_library would run ldconfig).
            self._libc = ctypes.CDLL(None, use_errno=True)
            self._descriptor = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            pass
        if self._descriptor < 0:
            self.complete = False
            return
        self._watch(roots)
        self._drain()  # the watch's own listings of the folders it walked

    def _drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._descriptor, 1 << 16):
                pass

    def _watch(self, roots: Iterable[str]) -> None:
        queue = deque(dict.fromkeys(os.path.realpath(root) for root in roots))
        seen: set[str] = set()
        while queue:
            folder = queue.popleft()
            if folder in seen:
                continue
            seen.add(folder)
            if len(self._folders) >= MAX_FOLDERS:
                self.complete = False
                return
            descriptor = self._libc.inotify_add_watch(self._descriptor, os.fsencode(folder), _MASK)
            if descriptor < 0:
                if ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    self.complete = False  # out of watches: the tree is not watched whole
                    return
                continue
            self._folders[descriptor] = folder
            self._watched.add(folder)
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if _watched(entry):
                            queue.append(entry.path)
            except OSError:
                continue

    def covers(self, path: str) -> bool:
        """Whether an open of `path` would be seen: its folder is watched, and the whole tree."""
        folder = os.path.dirname(os.path.realpath(path))
        return self.complete and folder in self._watched

    def opened(self) -> Opened:
        """Every open the kernel told since the watch began; the watch ends."""
        result = Opened(complete=self.complete)
        if self._descriptor < 0:
            return result
        counts: dict[str, list[int]] = {}
        try:
            while True:
                try:
                    chunk = os.read(self._descriptor, 1 << 16)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                self._pending += chunk
                self._take(counts, result)
        finally:
            os.close(self._descriptor)
            self._descriptor = -1
        for path, (opens, writes) in counts.items():
            if writes:
                result.files_written.add(path)
            if opens > writes:  # opened for reading (or still open at the end)
                result.files_read.add(path)
        return result

    def _take(self, counts: dict[str, list[int]], result: Opened) -> None:
        """Count the complete events of the pending bytes: per file, its opens and its closes
        after writing; per folder, whether it was opened (listed)."""
        data, offset = self._pending, 0
        while offset + _EVENT.size <= len(data):
            watch, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            end = offset + _EVENT.size + length
            if end > len(data):
                break
            name = data[offset + _EVENT.size : end].rstrip(b"\0")
            offset = end
            if mask & _IN_Q_OVERFLOW:
                result.complete = False
                continue
            folder = self._folders.get(watch)
            if folder is None or not name:  # a folder's own events are told by its parent's
                continue
            path = os.path.join(folder, os.fsdecode(name))
            if mask & _IN_ISDIR:
                if mask & _IN_OPEN:
                    result.folders.add(path)
                continue
            opens_and_writes = counts.setdefault(path, [0, 0])
            if mask & _IN_OPEN:
                opens_and_writes[0] += 1
            if mask & _IN_CLOSE_WRITE:
                opens_and_writes[1] += 1
        self._pending = data[offset:]


def _watched(entry: os.DirEntry[str]) -> bool:
    """Whether the folder `entry` may hold a model's inputs: not a dot-folder, a tool's folder
    or a Python environment."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
    except OSError:
        return False
    if entry.name.startswith(".") or entry.name in _PASSED_OVER:
        return False
    return not os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))
