"""The one way gradcheck writes a file (a report, a baseline, a fixed script): never through a
symbolic link, never into a FIFO, a socket or a device, always by replacing the file whole (a
new file renamed over the old one, so a reader never sees half of it and a link planted at the
path is replaced, not followed), keeping an existing file's mode.

gradcheck runs in CI on pull requests: a default report path (the Action's `gradcheck.sarif`)
is a path the user never typed, and a pull request can plant a link there. A link is refused
with one line whatever its target; the user can name the file it points to instead.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from gradcheck_cli.errors import GradcheckError, escape_controls


def problem_writing(path: Path) -> str | None:
    """Why gradcheck will not write `path`, in a few words, or None; creates nothing."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return _new_file_problem(path)
    except OSError as error:
        return _reason(error)
    if stat.S_ISLNK(status.st_mode):
        return (
            f"it is a symbolic link (to {_link_target(path)}); gradcheck writes no file through "
            "a link: name the file itself"
        )
    if stat.S_ISDIR(status.st_mode):
        return _reason(OSError(errno.EISDIR, os.strerror(errno.EISDIR)))
    if not stat.S_ISREG(status.st_mode):
        return "it is not a regular file (a FIFO, a socket or a device); gradcheck writes files"
    if not os.access(path, os.W_OK):
        return _reason(OSError(errno.EACCES, os.strerror(errno.EACCES)))
    return _new_file_problem(path)


def write_file(path: Path, text: str, *, keep_owner: bool = False) -> None:
    """Write `text` (UTF-8, its line breaks as they are) to `path` as a whole new file renamed
    over it. An existing file keeps its mode; with `keep_owner`, its owner and group too
    (written in place when gradcheck may not give the new file the old one's owner).

    Raises GradcheckError with the reason when `problem_writing` finds one, OSError when the
    file system refuses."""
    problem = problem_writing(path)
    if problem is not None:
        raise GradcheckError(f"cannot write {path}: {problem}")
    data = text.encode("utf-8")
    try:
        old: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        old = None
    if keep_owner and old is not None and not _may_own_as(old):
        _write_in_place(path, data)
        return
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".partial"
    )
    try:
        with os.fdopen(descriptor, "wb") as new:
            new.write(data)
            os.fchmod(new.fileno(), stat.S_IMODE(old.st_mode) if old else _new_file_mode())
            if keep_owner and old is not None and _owner(old) != (os.geteuid(), os.getegid()):
                os.fchown(new.fileno(), old.st_uid, old.st_gid)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _new_file_problem(path: Path) -> str | None:
    """Why no file can be made at `path`: its folder must exist and let us add an entry."""
    try:
        folder = path.parent.stat()
    except OSError as error:
        return _reason(error)
    if not stat.S_ISDIR(folder.st_mode):
        return _reason(OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return _reason(OSError(errno.EACCES, os.strerror(errno.EACCES)))
    return None


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "somewhere gradcheck cannot read"


def _reason(error: OSError) -> str:
    text = error.strerror or str(error)
    return escape_controls(text[:1].lower() + text[1:])


def _owner(status: os.stat_result) -> tuple[int, int]:
    return status.st_uid, status.st_gid


def _may_own_as(status: os.stat_result) -> bool:
    """Whether a file gradcheck makes can be given `status`'s owner and group: its own, or any
    when it runs as root; a group of its own otherwise (chown's rule for other users)."""
    if os.geteuid() == 0 or _owner(status) == (os.geteuid(), os.getegid()):
        return True
    return status.st_uid == os.geteuid() and status.st_gid in os.getgroups()


def _write_in_place(path: Path, data: bytes) -> None:
    """Rewrite the file's content through its own inode (owner, group, mode, links kept),
    never following a link that replaced it since it was checked."""
    descriptor = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "wb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file any more")
        file.truncate(0)
        file.write(data)


def _new_file_mode() -> int:
    """The mode a new file gets from open(): 0666 less the process's umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
