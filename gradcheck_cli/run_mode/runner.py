"""Run a training script (or notebook) as `__main__` in the worker up to its first training step."""

from __future__ import annotations

import runpy
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.run_mode.capture import Capture, CaptureFailed, ScriptStopped
from gradcheck_cli.tracing.override_maps import recording_override_maps
from gradcheck_cli.worker import progress
from gradcheck_cli.worker.protocol import RunResult, Traced, WorkerRequest

running = False
"""Whether this process is `gradcheck run`'s worker, running a script: its own watch() then
leaves the check to the run."""


def run_script(
    request: WorkerRequest,
    deliver: Callable[[RunResult], None],
    share: Callable[[Traced], None] | None = None,
) -> None:
    """Run the script with its arguments; `deliver` gets its gradient requests at its first
    weight change (or at its end), `share` each graph request as it is made. GradcheckError if
    it fails or never asks for gradients."""
    global running
    running = True
    path = request.path
    shown = display_path(path)  # before the script can change the working directory
    capture = Capture(deliver, run_on=request.run_on, share=share, whole_steps=True)
    capture.track_variables()
    capture.install()
    sys.argv = [str(path), *request.arguments]
    sys.path.insert(0, str(path.parent))
    # A notebook is read before anything of it runs: one that cannot be read is gradcheck's
    # one-line refusal, not a failure of the script.
    cells = _notebook_cells(path) if path.suffix == ".ipynb" else None
    progress.say(f"running {path.name} up to its first training step...")
    try:
        with recording_override_maps():
            _run_as_main(path, cells)
    except ScriptStopped:
        return
    except CaptureFailed as failure:
        if request.options.debug:
            traceback.print_exception(failure.__cause__ or failure)
        raise GradcheckError(str(failure)) from None
    except SystemExit as exit_:
        if not capture.requests and not capture.delivered:
            raise GradcheckError(
                f"{shown} exited (sys.exit({exit_.code})) before it asked TensorFlow for gradients"
            ) from None
    except BaseException as error:  # the script's own failure: its traceback, then one line
        from gradcheck_cli.tracing.traced import exception_location

        where = exception_location(error)
        at = f" at {display_path(where.file)}:{where.line}" if where else ""
        if capture.delivered:
            _print_script_traceback(error, path)
            return
        if capture.requests:
            # Failing after asking for gradients is often the symptom gradcheck explains:
            # "No gradients provided for any variable" while the step is traced.
            print(
                f"gradcheck: {path.name} raised {type(error).__name__}{at} after it asked for "
                f"gradients: {_first_line(error)}",
                file=sys.stderr,
            )
            _finish(capture)
            return
        _print_script_traceback(error, path)
        # -q keeps the script's output, its traceback included, off stderr (unless debugging).
        hidden = request.options.quiet and not request.options.debug
        where_traceback = (
            "run without -q to see its traceback" if hidden else "its traceback is above"
        )
        raise GradcheckError(
            f"{shown} raised {type(error).__name__}{at} before it asked TensorFlow for "
            f"gradients: {_first_line(error)} ({where_traceback})"
        ) from None
    if capture.delivered:
        return
    if not capture.requests and capture.first_tensor_request is not None:
        api, location = capture.first_tensor_request
        where = f" at line {location.line}" if location is not None else ""
        count = capture.tensor_request_count
        times = f" ({count} requests)" if count > 1 else ""
        raise GradcheckError(
            f"{shown} ran to its end asking TensorFlow for gradients with respect to "
            f"tensors only, never a trainable variable: {api}{where}{times}; gradcheck checks the "
            "variables a training step trains, and this script trains none (a deep dream or "
            "an adversarial input changes an input, not a weight)"
        )
    if not capture.requests and capture.idle:
        idle = capture.idle[0]
        where = f" at line {idle.location.line}" if idle.location is not None else ""
        said = f"{shown} ran to its end without asking TensorFlow for gradients: {idle.api}{where}"
        if idle.frozen:
            raise GradcheckError(
                f"{said} ran on a model with no trainable weight ({idle.model}.trainable is "
                "False, or every layer of it is frozen), so Keras asked for none"
            )
        raise GradcheckError(
            f"{said} ran on a model that tracks no weight at all{_untracked(capture)}"
        )
    if not capture.requests:
        raise GradcheckError(
            f"{shown} ran to its end without asking TensorFlow for gradients: no "
            "GradientTape.gradient, tf.gradients, Optimizer.minimize or Model.fit was called"
        )
    _finish(capture)


def _untracked(capture: Capture) -> str:
    """What the script created that a model tracking no weight left out, in words."""
    from gradcheck_cli.run_mode.untrained import untrained

    names = [variable.name for variable in untrained(capture.created, set()).variables]
    if not names:
        return ", so Keras asked for no gradient"
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return (
        f" (its weights list is empty), so Keras asked for no gradient, while the script "
        f"created {len(names)} trainable variable{'s' if len(names) > 1 else ''}: {shown}; "
        "a model tracks the layers and variables assigned to its attributes, or held in a "
        "list, tuple or dict of them, not those kept inside another object"
    )


def _finish(capture: Capture) -> None:
    try:
        capture.finish()
    except ScriptStopped:
        pass


def _first_line(error: BaseException) -> str:
    """What the error says, in one line: its first, or its last when the first is a heading (a
    traced function's "in user code:" above the frames, then "ValueError: ..." )."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    said = lines[-1] if len(lines) > 1 and lines[0].endswith(":") else lines[0]
    return said.removeprefix(f"{type(error).__name__}: ")


def _notebook_cells(path: Path) -> list[Any]:
    from gradcheck_cli.source_code.notebook import read_notebook

    cells, notes = read_notebook(path)
    for note in notes:
        print(f"gradcheck: {path.name}: {note}", file=sys.stderr)
    return cells


def _run_as_main(path: Path, cells: list[Any] | None) -> None:
    if cells is not None:
        from gradcheck_cli.source_code.notebook import run_cells

        namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
        sys.modules["__main__"].__dict__.update(namespace)
        run_cells(cells, sys.modules["__main__"].__dict__)
        return
    runpy.run_path(str(path), run_name="__main__")


def _print_script_traceback(error: BaseException, path: Path) -> None:
    """The script's traceback from its own first frame on (gradcheck's frames left out)."""
    tb = error.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(str(path)):
        tb = tb.tb_next
    lines = traceback.format_exception(type(error), error, tb or error.__traceback__)
    sys.stderr.write("".join(lines))
    sys.stderr.flush()
