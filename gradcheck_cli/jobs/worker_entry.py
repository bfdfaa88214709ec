"""The TensorFlow worker process: run one WorkerRequest and pickle back its result.

TensorFlow's state and whatever the user's code prints stay out of gradcheck's own process.
Usage (by gradcheck itself): python -m gradcheck_cli.jobs.worker_entry REQUEST RESULT
(both pickles).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from gradcheck_cli.cache.file_reads import Recorder
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.worker.process_tree import MARK_VARIABLE, ProcessTree, kill_group
from gradcheck_cli.worker.protocol import (
    Job,
    WorkerFailure,
    WorkerRequest,
    WorkerResult,
    reads_path,
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
        recorder = Recorder()
        recorder.start()
    result: WorkerResult | None
    try:
        result = run_job(request, lambda delivered: _write(result_path, delivered))
    except GradcheckError as error:
        result = WorkerFailure(str(error))
    except Exception as error:  # a gradcheck bug: one line, the traceback only when debugging
        if request.options.debug:
            traceback.print_exc()
        result = WorkerFailure(
            f"internal error while tracing: {type(error).__name__}: {error} "
            "(run with --debug for the traceback)"
        )
    try:
        if result is not None:
            if recorder is not None and not isinstance(result, WorkerFailure):
                _write_reads(reads_path(result_path), recorder, request.path)
            _write(result_path, result)
        # The script may have replaced or closed sys.stdout (`sys.stdout = None`): flush
        # whatever the streams are now, and the ones Python started with.
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()  # type: ignore[union-attr]
        _end_descendants()
    finally:
        # The user's script may have started threads or registered atexit hooks that hang.
        os._exit(0)


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


def _write(path: Path, result: object) -> None:
    """Write the result whole, then give it its name: gradcheck may be watching for it."""
    partial = path.with_suffix(".partial")
    with partial.open("wb") as result_file:
        pickle.dump(result, result_file)
    partial.replace(path)


def run_job(request: WorkerRequest, deliver: Callable[[WorkerResult], None]) -> WorkerResult | None:
    """The job's result; None when the job delivered it itself (a run, as soon as it is known)."""
    options = request.options
    if request.job is Job.RUN:
        from gradcheck_cli.run_mode.runner import run_script

        run_script(request, deliver)
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
