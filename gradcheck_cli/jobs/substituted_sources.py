"""Run the user's code with the text of some files replaced, as if the files held it (a fix
checked before it is written): the script run as `__main__`, the modules it imports, and the
source that autograph and `inspect` read."""

from __future__ import annotations

import _io  # type: ignore[import-not-found]  # the module importlib's loaders read code with
import io
import linecache
import os
import sys
from collections.abc import Mapping
from importlib.machinery import SourceFileLoader
from typing import Any


def substitute(sources: Mapping[str, str]) -> None:
    """From now on in this process, each file in `sources` (absolute paths) reads as its text.

    Code is read with `io.open_code` (runpy, for the script) and importlib's loaders (for the
    modules it imports); a module's bytecode cache is passed by, so it is compiled from the
    text and no `.pyc` of it is written; `linecache` gives the text to `inspect.getsource` and
    to autograph (which re-reads a file with `updatecache` before it converts a function). The
    worker runs one job and exits, so nothing is undone.
    """
    if not sources:
        return
    texts = {os.path.realpath(path): text.encode() for path, text in sources.items()}
    opened = io.open_code

    def open_code(path: Any) -> Any:
        found = texts.get(os.path.realpath(os.fspath(path)))
        return io.BytesIO(found) if found is not None else opened(path)

    io.open_code = open_code  # type: ignore[assignment]
    _io.open_code = open_code
    stats = SourceFileLoader.path_stats

    def path_stats(self: SourceFileLoader, path: str) -> Mapping[str, Any]:
        if os.path.realpath(path) in texts:
            # No stats: importlib then neither trusts nor writes the bytecode cache.
            raise OSError(f"{path} is read from gradcheck's substituted text")
        return stats(self, path)

    SourceFileLoader.path_stats = path_stats  # type: ignore[method-assign]
    lines = {path: text.decode().splitlines(keepends=True) for path, text in texts.items()}
    update = linecache.updatecache

    def updatecache(filename: str, module_globals: Any = None) -> list[str]:
        # Autograph re-reads a function's file with updatecache before it converts it.
        found = lines.get(os.path.realpath(filename)) if filename else None
        if found is None:
            return update(filename, module_globals)
        # No modification time: linecache.checkcache keeps the entry instead of re-reading.
        linecache.cache[filename] = (sum(map(len, found)), None, found, filename)
        return found

    linecache.updatecache = updatecache
    for path in sources:
        updatecache(path)
        updatecache(os.path.realpath(path))
    sys.dont_write_bytecode = True
