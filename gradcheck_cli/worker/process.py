"""Run the TensorFlow worker in its own process and bring back its result.

The worker is `python -m gradcheck_cli.jobs.worker_entry REQUEST RESULT` in its own session.
`warm_workers.start_worker` starts it: a plain subprocess for the first worker of this process
(and with --debug), later ones forked by a warm launcher that has imported TensorFlow once
(`warm_launcher`). Either way this module sees a Popen-like process: its pid (left unreaped until
its process tree has ended), its stdout and stderr pipes, poll() and wait().
"""

from __future__ import annotations

import codecs
import contextlib
import os
import pickle
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from gradcheck_cli.errors import GradcheckError, escape_controls
from gradcheck_cli.options import (
    DEFAULT_TIMEOUT,
    default_memory_limit,
    environment_memory_limit,
    environment_timeout,
    memory_text,
    timeout_seconds,
)
from gradcheck_cli.worker.process_tree import ProcessTree
from gradcheck_cli.worker.progress import Status
from gradcheck_cli.worker.protocol import (
    UNWRITTEN_EXIT,
    EagerResult,
    Job,
    Reads,
    RunResult,
    TensorFlowGradients,
    Traced,
    TracedFunction,
    TracedGraph,
    WorkerFailure,
    WorkerRequest,
    WorkerResult,
    reads_path,
    snapshot_path,
)
from gradcheck_cli.worker.warm_workers import start_worker

# TensorFlow's C++ start-up lines (no GPU found, CPU features, oneDNN) say nothing about the
# user's model; the user's own prints and TensorFlow's Python warnings are kept.
_START_UP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} [\d:.]+\s+\d+ (cuda_\w+|cudart_stub|cpu_feature_guard|port)\.cc:\d+\].*"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler"
    r" flags\.)$"
)


def _without_tensorflow_start_up_noise(text: str) -> str:
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if not _START_UP_NOISE.match(line.rstrip("\n"))
    )


# What the worker itself says (a note, why a script failed) is gradcheck's, never labelled.
_GRADCHECK_LINE = "gradcheck: "


@dataclass(frozen=True)
class _Relay:
    """How the worker's output reaches our stderr: TensorFlow's start-up noise left out unless
    debugging; each line labelled `train.py: ` when the worker runs the user's script; nothing
    of the user's code with `quiet` (unless debugging), gradcheck's own lines still shown."""

    debug: bool = False
    label: str | None = None
    quiet: bool = False

    def shown(self, text: str, continued: bool = False) -> str:
        """The part of `text` to show; `continued`: it goes on a line shown before."""
        if not self.debug:
            text = _without_tensorflow_start_up_noise(text)
        if self.label is None and not (self.quiet and not self.debug):
            return text
        lines = []
        for index, line in enumerate(text.splitlines(keepends=True)):
            if index == 0 and continued:
                lines.append(line if not self.quiet or self.debug else "")
            elif line.startswith(_GRADCHECK_LINE):
                lines.append(line)
            elif self.quiet and not self.debug:
                continue
            elif self.label is not None:
                space = " " if line.strip("\r\n") else ""
                lines.append(f"{self.label}:{space}{line}")
            else:
                lines.append(line)
        return "".join(lines)


# `os.environ["TF_USE_LEGACY_KERAS"] = "1"`, `os.environ.setdefault("TF_USE_LEGACY_KERAS",
# "true")`, in a script or in a notebook's JSON (its quotes escaped).
_LEGACY_KERAS = re.compile(
    rb"""TF_USE_LEGACY_KERAS\\?["']\s*(?:\]\s*=|,)\s*\\?["'](?:1|true|True)\\?["']"""
)


def _sets_legacy_keras(request: WorkerRequest) -> bool:
    """Whether the script (or notebook) a job runs asks for Keras 2 itself."""
    if request.job not in (Job.SCRIPT, Job.RUN):
        return False
    from gradcheck_cli.source_code.files import bounded_text

    text = bounded_text(str(request.path), 1 << 24)
    return text is not None and _LEGACY_KERAS.search(text.encode()) is not None


def _gradcheck_importable(env: dict[str, str]) -> None:
    """-P keeps the working folder off a worker's sys.path; where gradcheck itself is found only
    there (run from its own source folder, not installed), that folder goes on PYTHONPATH."""
    home = Path(__file__).resolve().parents[2]
    paths = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if home == Path.cwd().resolve() and str(home) not in paths:
        env["PYTHONPATH"] = os.pathsep.join([str(home), *paths])


def _relay_for(request: WorkerRequest) -> _Relay:
    options = request.options
    user_code = request.job in (Job.RUN, Job.SCRIPT)
    return _Relay(
        debug=options.debug,
        label=escape_controls(request.path.name) if user_code else None,
        quiet=options.quiet,
    )


def _first_step(request: WorkerRequest) -> str:
    """The status line while the worker starts, before it says anything itself."""
    if request.job in (Job.RUN, Job.SCRIPT):
        return f"importing {request.path.name} with TensorFlow..."
    if request.job is Job.KERAS_FILE:
        return f"loading {request.path.name} with Keras..."
    return f"asking TensorFlow for the gradients of {request.path.name}..."


# What gradcheck holds of the worker's output at once: a read, and the unfinished last line.
_READ_BYTES = 64 * 1024
_LONGEST_LINE = 64 * 1024
# How long the relays may still drain the pipes once the tree is gone; one only waits longer when
# a process nobody could find still holds a pipe, and then it is left behind (a daemon thread).
_DRAIN_SECONDS = 2.0
_POLL_SECONDS = 0.05
_stderr_lock = threading.Lock()


Answer = TracedFunction | TracedGraph | EagerResult | TensorFlowGradients | RunResult


def run_worker(
    request: WorkerRequest,
    on_result: Callable[[WorkerResult], None] | None = None,
    on_snapshot: Callable[[Traced], None] | None = None,
) -> Answer:
    """Everything the worker (and the user's code in it) prints goes to our stderr, line by line.

    `request.options.timeout` (seconds; default GRADCHECK_TIMEOUT or 600) bounds a script that
    never returns; a WorkerFailure comes back as a GradcheckError. However the wait ends (the
    worker's exit, the time limit, an exception or a stop signal), every process the worker
    started is killed before this returns.

    A run that goes on after delivering its result (`request.run_on`) hands it to `on_result`
    as soon as it is written; the wait for the script's end then has no time limit.
    `on_snapshot` gets each graph request of a run as the worker writes it, while the script
    goes on (`snapshot_path`).
    """
    return _run_worker(request, on_result, on_snapshot)[0]


def run_worker_recording(request: WorkerRequest) -> tuple[Answer, Reads | None]:
    """`run_worker`, and what the job read (None if the worker could not tell)."""
    return _run_worker(replace(request, record_reads=True), None)


def _run_worker(
    request: WorkerRequest,
    on_result: Callable[[WorkerResult], None] | None,
    on_snapshot: Callable[[Traced], None] | None = None,
) -> tuple[Answer, Reads | None]:
    options = request.options
    timeout = _time_limit(options.timeout)
    memory_limit = _memory_limit(options.memory_limit)
    request = replace(request, options=replace(options, memory_limit=memory_limit))
    with _scratch_folder() as scratch:
        request_path = Path(scratch) / "request.pickle"
        result_path = Path(scratch) / "result.pickle"
        try:
            with request_path.open("wb") as request_file:
                pickle.dump(request, request_file)
        except OSError as error:
            raise _unwritable(Path(scratch), error) from None
        tree = ProcessTree()
        status = Status(options.progress, _first_step(request), Path(scratch))
        env = tree.environment(os.environ)
        _gradcheck_importable(env)
        if "TF_USE_LEGACY_KERAS" not in env and _sets_legacy_keras(request):
            # Set as the script sets it, before the worker (or its warm launcher) imports
            # TensorFlow and Keras 3: TensorFlow resolves parts of tf.keras by what is
            # imported first, and a Keras 3 import ahead of the script's own line mixes Keras
            # 3 layers into its Keras 2 models (a tf_keras Sequential refusing a Dense).
            env["TF_USE_LEGACY_KERAS"] = "1"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(status.environment())
        started = time.monotonic()
        process = start_worker(
            [
                sys.executable,
                # -P: the working folder is not on sys.path, so a checked repository's
                # `pickle.py` or `numpy.py` is never imported in its stead.
                "-P",
                "-m",
                "gradcheck_cli.jobs.worker_entry",
                str(request_path),
                str(result_path),
            ],
            env,
            tree,
            # TensorFlow's start-up log, which --debug shows, is printed by its import.
            plain=options.debug,
            timeout=timeout,
        )
        # A warm launcher's first start (TensorFlow's import) counts, as a plain worker's does.
        left = max(0.0, timeout - (time.monotonic() - started))
        relays: list[threading.Thread] = []
        relay = _relay_for(request)
        try:
            with status:
                for stream in (process.stdout, process.stderr):
                    assert stream is not None
                    relays.append(_start_relay(stream, relay))
                watch = result_path if request.run_on and on_result is not None else None
                meanwhile = status.poll
                if on_snapshot is not None:
                    meanwhile = _Snapshots(result_path, on_snapshot, status.poll)
                finished = _wait_for_exit(process.pid, left, watch, meanwhile)
            if finished and watch is not None and process.poll() is None:
                assert on_result is not None
                delivered = _read_result(result_path)
                if not isinstance(delivered, WorkerFailure):
                    on_result(delivered)
                finished = _wait_for_exit(process.pid, None)
        finally:
            tree.end([process.pid])
            process.wait()
            deadline = time.monotonic() + _DRAIN_SECONDS
            for thread in relays:
                thread.join(max(0.0, deadline - time.monotonic()))
        # A result written before the time ran out is the answer, however long the worker took
        # to end after it (a thread the script left, a child that would not die).
        finished = finished or result_path.is_file()
        if not finished and request.job is Job.RUN:
            raise GradcheckError(
                f"{request.path} did not ask TensorFlow for gradients within {timeout:g} s "
                "(importing TensorFlow included); set --timeout (or GRADCHECK_TIMEOUT) if it "
                "needs longer to reach its first training step"
            )
        if not finished:
            raise GradcheckError(
                f"{request.path} did not finish within {timeout:g} s (an endless loop, or "
                "training that runs at import?); set GRADCHECK_TIMEOUT or --timeout if it needs "
                "longer"
            )
        if not result_path.is_file():
            code = process.wait()  # reaped already: its exit status
            if code == UNWRITTEN_EXIT:
                raise _unwritable(Path(scratch), None)
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            causes = "os._exit, a crash or a kill"
            if memory_limit and code < 0:  # TensorFlow aborts when an allocation fails
                causes += f", or its memory limit of {memory_text(memory_limit)} (--memory-limit)"
            raise GradcheckError(
                f"{request.path} ended the process while gradcheck loaded it ({how}: {causes}); "
                "anything it printed is above"
            )
        result = _read_result(result_path)
        reads = _read_reads(reads_path(result_path)) if request.record_reads else None
    if isinstance(result, WorkerFailure):
        raise GradcheckError(result.message)
    return result, reads


class _Snapshots:
    """At each look at the worker: hand on the graph requests it wrote since, then `then`."""

    def __init__(
        self, result_path: Path, on_snapshot: Callable[[Traced], None], then: Callable[[], None]
    ) -> None:
        self._result_path, self._on_snapshot, self._then = result_path, on_snapshot, then
        self._read = 0

    def __call__(self) -> None:
        path = snapshot_path(self._result_path, self._read)
        while path.is_file():
            self._read += 1
            try:
                snapshot = _read_result(path)
            except (OSError, pickle.UnpicklingError, EOFError):
                snapshot = None  # the result holds the request all the same
            if isinstance(snapshot, (TracedFunction, TracedGraph)):
                self._on_snapshot(snapshot)
            path = snapshot_path(self._result_path, self._read)
        self._then()


def _read_reads(path: Path) -> Reads | None:
    try:
        with path.open("rb") as reads_file:
            reads = pickle.load(reads_file)
    except (OSError, pickle.UnpicklingError, EOFError):
        return None
    return reads if isinstance(reads, Reads) else None


def _read_result(path: Path) -> WorkerResult:
    with path.open("rb") as result_file:
        result: WorkerResult = pickle.load(result_file)
    return result


def _wait_for_exit(
    pid: int,
    timeout: float | None,
    result: Path | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> bool:
    """Whether the worker ended within `timeout` (None: no limit), or wrote `result` if given;
    it is left unreaped, so its process group's id cannot be reused before the group is killed.
    Its pipes may stay open much longer: any child it started holds them. `meanwhile` runs at
    each look (the status line's update)."""
    import psutil

    deadline = time.monotonic() + (timeout if timeout is not None else float("inf"))
    try:
        worker = psutil.Process(pid)
        while worker.status() != psutil.STATUS_ZOMBIE:
            if result is not None and result.exists():
                return True
            if meanwhile is not None:
                meanwhile()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(_POLL_SECONDS, left))
    except psutil.NoSuchProcess:
        pass
    return True


def _start_relay(stream: IO[bytes], relay: _Relay) -> threading.Thread:
    thread = threading.Thread(target=_pump, args=(stream, relay), daemon=True)
    thread.start()
    return thread


def _pump(stream: IO[bytes], relay: _Relay) -> None:
    """Copy complete lines from the worker's pipe to our stderr as they come, until EOF."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    shown = True
    continued = False  # the last write ended inside an overlong line
    with stream:
        while chunk := os.read(stream.fileno(), _READ_BYTES):
            text = pending + decoder.decode(chunk)
            end = text.rfind("\n") + 1
            if len(text) - end > _LONGEST_LINE:
                end = len(text)
            if end:
                shown = shown and _show(relay.shown(text[:end], continued))
                continued = not text[:end].endswith("\n")
            pending = text[end:]
    if shown:
        _show(relay.shown(pending + decoder.decode(b"", final=True), continued))


def _show(text: str) -> bool:
    """Write the worker's lines to our stderr; False once our stderr is gone (the relay then
    only drains the pipe, so the worker never blocks on a full one)."""
    if not text:
        return True
    try:
        with _stderr_lock:
            sys.stderr.write(text)
            sys.stderr.flush()
    except (OSError, ValueError):
        return False
    return True


@contextlib.contextmanager
def _scratch_folder() -> Iterator[str]:
    """The job's own folder in the system's temporary folder, removed when the job ends."""
    try:
        folder = tempfile.TemporaryDirectory(prefix="gradcheck-")
    except OSError as error:
        raise _unwritable(Path(tempfile.gettempdir()), error) from None
    with folder as scratch:
        yield scratch


def _unwritable(folder: Path, error: OSError | None) -> GradcheckError:
    """gradcheck's own files cannot be written: a full or unwritable temporary folder, never
    the model's fault."""
    import shutil

    why = f": {error.strerror}" if error is not None and error.strerror else ""
    with contextlib.suppress(OSError):
        if shutil.disk_usage(folder).free < 2**20:
            why = ": no space left on the disk"
    system_temp = folder.parent if folder.name.startswith("gradcheck-") else folder
    return GradcheckError(
        f"gradcheck cannot write its temporary files in {system_temp}{why}; free space there "
        "or set TMPDIR to a folder with room"
    )


def _memory_limit(given: int | None) -> int:
    """The worker's memory limit in bytes (0: none): the options', else
    GRADCHECK_MEMORY_LIMIT's, else the default."""
    if given is not None:
        return given
    variable = environment_memory_limit(os.environ)
    return variable if variable is not None else default_memory_limit()


def _time_limit(given: float | None) -> float:
    """The worker's time limit: the options', else GRADCHECK_TIMEOUT's, else the default."""
    if given is None:
        return environment_timeout(os.environ) or DEFAULT_TIMEOUT
    try:
        return timeout_seconds(given)
    except ValueError as error:
        raise GradcheckError(f"timeout: {error}") from None
