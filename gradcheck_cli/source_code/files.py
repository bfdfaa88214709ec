"""Reading a source file that an input names: only a regular, bounded file, never a device, a
FIFO or the kernel's pseudo-files (a crafted SavedModel's debug info names any path it likes)."""

from __future__ import annotations

import os
import stat

# The largest source file gradcheck reads for its lines.
MAX_SOURCE_BYTES = 8 * 1024 * 1024
# Never read, whatever names them: the kernel's and the devices' pseudo-files.
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev", "/run")
# What a source file is: a Python file (a notebook's cells are read through the notebook).
PYTHON_SUFFIXES = (".py", ".pyw")


def in_system_folder(real: str) -> bool:
    """Whether the resolved path `real` lies in one of SYSTEM_FOLDERS."""
    return any(real == folder or real.startswith(folder + os.sep) for folder in SYSTEM_FOLDERS)


def bounded_text(file: str, limit: int = MAX_SOURCE_BYTES) -> str | None:
    """The text of `file` if it is a regular file of at most `limit` bytes outside the system
    folders; else None (the caller shows a location without its line)."""
    try:
        if in_system_folder(os.path.realpath(file)):
            return None
        # O_NONBLOCK: opening a FIFO must not wait for a writer.
        descriptor = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
                return None
            data = handle.read(limit + 1)
    except (OSError, ValueError):
        return None
    if len(data) > limit:
        return None
    return data.decode("utf-8", errors="replace")


def python_source(file: str) -> str | None:
    """`bounded_text` of a Python file; None for any other suffix."""
    return bounded_text(file) if file.endswith(PYTHON_SUFFIXES) else None
