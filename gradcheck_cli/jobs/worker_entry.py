"""The TensorFlow worker process: run one WorkerRequest and pickle back its result.

TensorFlow's state and whatever the user's code prints stay out of gradcheck's own process.
Usage (by gradcheck itself): python -m gradcheck_cli.jobs.worker_entry REQUEST RESULT
(both pickles).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from gradcheck_cli.cache.file_reads import Recorder, after_import
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.jobs.substituted_sources import substitute
from gradcheck_cli.options import memory_text
from gradcheck_cli.worker.process_tree import MARK_VARIABLE, ProcessTree, kill_group
from gradcheck_cli.worker.protocol import (
    UNWRITTEN_EXIT,
    Job,
    Traced,
    WorkerFailure,
    WorkerRequest,
    WorkerResult,
    reads_path,
    snapshot_path,
)

# How often the worker checks that gradcheck, its parent, is still there.
_PARENT_POLL_SECONDS = 0.5


def _own_temp_folder(scratch: Path) -> None:
    """Temporary files of the job (autograph's generated modules, the script's own) go into the
    job's scratch folder, which gradcheck removes when the worker ends: the worker ends with
    os._exit, and nothing it writes may stay behind in the system's temporary folder."""
    import tempfile

    folder = scratch / "tmp"
    folder.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = str(folder)  # a warm launcher's fork may have looked it up already


def _adopt_orphans() -> None:
    """Make this worker the child subreaper of everything the script starts (Linux): a daemon
    that double-forks, calls setsid and execs with an empty environment is re-parented to the
    worker, not to init, so the worker still finds it and ends it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


_PR_SET_CHILD_SUBREAPER = 36


def _end_descendants() -> None:
    """End every process the job left (adopted orphans included) before the worker exits."""
    import psutil

    with contextlib.suppress(psutil.Error):
        children = [child.pid for child in psutil.Process().children()]
        if children:
            ProcessTree().end(children)


def main(argv: list[str]) -> int:
    _adopt_orphans()
    _end_with_gradcheck(scratch=Path(argv[1]).parent)
    _own_temp_folder(Path(argv[1]).parent)
    with Path(argv[1]).open("rb") as request_file:
        request: WorkerRequest = pickle.load(request_file)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    result_path = Path(argv[2])
    recorder = None
    if request.record_reads:
        recorder = Recorder(_user_folders(request.path))
        recorder.start()
        after_import("tensorflow", lambda _: _watch_kernel_reads(recorder))
    substitute(dict(request.sources))
    result: WorkerResult | None
    try:
        _limit_memory(request.options.memory_limit)
        from gradcheck_cli.tracing.keras_models import warnings_told_by_their_cause

        with warnings_told_by_their_cause():
            result = run_job(
                request,
                lambda delivered: _deliver(result_path, delivered),
                _Sharing(result_path),
            )
    except Exception as error:
        result = _failure(error, request)
    exit_code = 0
    try:
        try:
            if result is not None:
                if recorder is not None and not isinstance(result, WorkerFailure):
                    _write_reads(reads_path(result_path), recorder, request.path)
                _write(result_path, result)
        except OSError:
            exit_code = UNWRITTEN_EXIT
        # The script may have replaced or closed sys.stdout (`sys.stdout = None`): flush
        # whatever the streams are now, and the ones Python started with.
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()  # type: ignore[union-attr]
        _end_descendants()
    finally:
        # The user's script may have started threads or registered atexit hooks that hang.
        os._exit(exit_code)


def _watch_kernel_reads(recorder: Recorder) -> None:
    from gradcheck_cli.tracing.kernel_reads import watch_kernel_reads

    watch_kernel_reads(recorder)


def _user_folders(model: Path) -> list[Path]:
    """The folders whose files the job may read in C code unseen by the audit hook: the model's
    own folder, and the working folder when the model lies under it (the project's)."""
    folder = model.parent
    working = Path.cwd()
    return [folder, working] if folder.is_relative_to(working) else [folder]


def _limit_memory(limit: int | None) -> None:
    """Bound what this worker and everything it starts may allocate (RLIMIT_DATA: the heap and
    private writable mappings, what a decompression bomb or a runaway script fills; not the
    address space TensorFlow's libraries and thread stacks reserve, which grows with the
    machine's cores). None or 0: no limit."""
    import resource

    if not limit:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _failure(error: Exception, request: WorkerRequest) -> WorkerFailure:
    """The one line for a job that failed; a failed allocation names the memory limit."""
    if isinstance(error, GradcheckError):
        message = str(error)
    else:  # a gradcheck bug: one line, the traceback only when debugging
        if request.options.debug:
            traceback.print_exc()
        message = (
            f"internal error while tracing: {type(error).__name__}: {error} "
            "(run with --debug for the traceback)"
        )
    full = _chained(error, _no_space)
    if full is not None:
        import tempfile

        # The job's temporary folder is SYSTEM_TEMP/gradcheck-XXXX/tmp (_own_temp_folder).
        system_temp = Path(tempfile.gettempdir()).parent.parent
        full_file = getattr(full, "filename", None)
        where = f" writing {full_file}" if full_file else ""
        return WorkerFailure(
            f"{message} (no space left on the disk{where}; gradcheck's temporary files go to "
            f"{system_temp}: free space there or set TMPDIR to a folder with room)"
        )
    limit = request.options.memory_limit
    if limit and _out_of_memory(error):
        message += (
            f"; the check may use {memory_text(limit)} of memory: raise that with "
            "--memory-limit (GRADCHECK_MEMORY_LIMIT, memory-limit in [tool.gradcheck]), "
            "0 for no limit"
        )
    return WorkerFailure(message)


def _out_of_memory(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from or while handling, is a failed
    allocation: Python's and NumPy's MemoryError, TensorFlow's ResourceExhaustedError."""
    return _chained(error, _failed_allocation) is not None


def _failed_allocation(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or type(error).__name__ == "ResourceExhaustedError"


def _no_space(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def _chained(error: BaseException, test: Callable[[BaseException], bool]) -> BaseException | None:
    """The first of `error` and the errors it was raised from or while handling that passes
    `test`; None if none does."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if test(current):
            return current
        pending += [current.__cause__, current.__context__]
    return None


def _end_with_gradcheck(scratch: Path) -> None:
    """gradcheck ends this worker's whole tree when it finishes or is stopped; killed (SIGKILL),
    it cannot. The worker then ends the tree itself, as soon as its parent is gone: its
    descendants, its process group and every process that carries the mark gradcheck gave its
    tree (the last one in its environment; the earlier ones are trees gradcheck itself belongs
    to, which go on); and it removes gradcheck's `scratch` folder, which holds its request."""
    parent = os.getppid()
    tree = ProcessTree()  # counts only processes started from now on
    marks = os.environ.get(MARK_VARIABLE, "").split()
    if marks:
        tree.include(marks[-1], spare=os.getpid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_SECONDS)
        import psutil

        tree.end([child.pid for child in psutil.Process().children()])
        shutil.rmtree(scratch, ignore_errors=True)
        kill_group(os.getpid())  # this worker with it
        os._exit(1)

    threading.Thread(target=watch, name="gradcheck-parent-watch", daemon=True).start()


def _write_reads(path: Path, recorder: Recorder, model: Path) -> None:
    """What the job read, for the cache; none (the result is not cached) if a file that it read
    cannot be hashed now."""
    try:
        reads = recorder.reads(always=[model])
    except OSError:
        return
    _write(path, reads)


def _deliver(path: Path, result: WorkerResult) -> None:
    """Write a result the running job delivers; if it cannot be written (a full disk), the
    worker ends at once with UNWRITTEN_EXIT, never a traceback in the user's script."""
    try:
        _write(path, result)
    except OSError:
        _end_descendants()
        os._exit(UNWRITTEN_EXIT)


def _write(path: Path, result: object) -> None:
    """Write the result whole, then give it its name: gradcheck may be watching for it."""
    partial = path.with_suffix(".partial")
    with partial.open("wb") as result_file:
        pickle.dump(result, result_file)
    partial.replace(path)


class _Sharing:
    """Writes a run's graph requests, each as soon as it is made (`snapshot_path`)."""

    def __init__(self, result_path: Path) -> None:
        self._result_path = result_path
        self._written = 0

    def __call__(self, traced: Traced) -> None:
        try:
            _write(snapshot_path(self._result_path, self._written), traced)
        except OSError:  # the result holds the request all the same
            return
        self._written += 1


def run_job(
    request: WorkerRequest,
    deliver: Callable[[WorkerResult], None],
    share: Callable[[Traced], None] | None = None,
) -> WorkerResult | None:
    """The job's result; None when the job delivered it itself (a run, as soon as it is known).
    `share`: takes each graph request of a run as it is made."""
    options = request.options
    if request.job is Job.RUN:
        from gradcheck_cli.run_mode.runner import run_script

        run_script(request, deliver, share)
        return None
    if request.job is Job.SCRIPT:
        from gradcheck_cli.tracing.script_loading import load_script

        return load_script(request.path, options.loss, options.verify)
    if request.job is Job.KERAS_FILE:
        from gradcheck_cli.tracing.keras_models import load_keras_file

        return load_keras_file(
            request.path,
            options.loss,
            options.verify,
            options.unsafe_deserialization,
            options.imports,
        )
    from gradcheck_cli.tracing.tf_verification import saved_model_gradients

    assert options.loss is not None
    return saved_model_gradients(request.path, options.loss)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
