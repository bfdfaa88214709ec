"""Source locations from a GraphDebugInfo proto or a live stack: the user's innermost frame,
with its callers, and where on its line the call it runs starts."""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Sequence
from dataclasses import replace
from types import FrameType
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.notebook import notebook_cell

# Frames inside these folders belong to libraries, not to the user's model code.
_LIBRARY_MARKERS = (
    f"{os.sep}site-packages{os.sep}",
    f"{os.sep}dist-packages{os.sep}",
    f"{os.sep}lib{os.sep}python3",
    "<frozen ",
    "__autograph_generated_file",
    f"{os.sep}gradcheck_cli{os.sep}",
)


@functools.lru_cache(maxsize=4096)
def is_user_file(path: str) -> bool:
    """Whether frames in `path` are the user's code. Asked for every frame of every op's
    traceback, so of the same few files thousands of times: cached."""
    # A notebook cell that gradcheck runs is the user's code, wherever the notebook lives.
    if notebook_cell(path) is not None:
        return True
    return bool(path) and not any(marker in path for marker in _LIBRARY_MARKERS)


# Frames a library call passes through on its way to the op's real code: dispatchers,
# deprecation and traceback wrappers, autograph, and gradcheck's own watch on Keras's layers.
_WRAPPER_MARKERS = (
    f"{os.sep}gradcheck_cli{os.sep}",
    f"tensorflow{os.sep}python{os.sep}util{os.sep}",
    f"tensorflow{os.sep}python{os.sep}ops{os.sep}weak_tensor_ops",
    f"keras{os.sep}src{os.sep}utils{os.sep}traceback_utils",
    f"{os.sep}autograph{os.sep}",
)
# Libraries whose own code makes ops, by the folder their files are in, as users name them.
_LIBRARIES = {
    "keras_hub": "keras_hub",
    "tf_keras": "Keras",
    "keras": "Keras",
    "tensorflow_probability": "TensorFlow Probability",
    "tensorflow_model_optimization": "TF Model Optimization",
}


def library_entry(frames: list[tuple[str, str]]) -> str | None:
    """Where a library made an op that the user's code only called it for: `frames` are the
    (file, function) frames after the user's innermost one, outermost first. None when the
    user called the op's own API (`tf.stop_gradient`, `keras.ops.stop_gradient`)."""
    calls = [(path, f) for path, f in frames if not any(m in path for m in _WRAPPER_MARKERS)]
    if not calls or calls[0][1] == "stop_gradient" or _own_api(calls):
        return None
    path, function = calls[0]
    parts = path.split(os.sep)
    for folder, name in _LIBRARIES.items():
        if folder in parts:
            return name
    return f"TensorFlow's {function}" if "tensorflow" in parts else None


# Where TensorFlow makes an op from its definition: the generated op wrappers (gen_math_ops.py)
# and the framework they call.
_OP_MAKERS = (f"{os.sep}gen_", f"tensorflow{os.sep}python{os.sep}framework{os.sep}")


def _own_api(calls: list[tuple[str, str]]) -> bool:
    """Whether the user called the op's own API (tf.cast, keras.ops.cast): the function called
    reaches TensorFlow's op maker directly, or through functions of the same name (a backend's
    cast), not through another function of its library (convert_image_dtype's saturate_cast)."""
    entry = calls[0][1]
    for path, function in calls[1:]:
        if any(maker in path for maker in _OP_MAKERS):
            return True
        if function != entry:
            return False
    return False


class DebugInfoLocations:
    """Looks up `"<node>@<function>"` keys; frames run outermost first, innermost last.

    Asked once per node: the ops of one layer share their frames, and often their whole trace,
    so each frame is resolved once and each trace's location built once.
    """

    def __init__(self, debug_info: Any) -> None:
        self._info = debug_info
        self._files = list(debug_info.files)
        self._frames: dict[int, tuple[str, int, str | None] | None] = {}
        self._traces: dict[object, SourceLocation | None] = {}

    def __call__(self, node: str, function: str) -> SourceLocation | None:
        info = self._info
        key = f"{node}@{function}"
        trace_id = info.name_to_trace_id.get(key)
        if trace_id is not None:
            if trace_id not in self._traces:
                trace = info.traces_by_id.get(trace_id)
                frame_ids = trace.frame_id if trace is not None else ()
                self._traces[trace_id] = self._located(frame_ids)
            return self._traces[trace_id]
        if key in info.traces:
            return innermost_with_callers(
                [f for f in map(self._frame, info.traces[key].file_line_cols) if f is not None]
            )
        return None

    def _located(self, frame_ids: Any) -> SourceLocation | None:
        frames = []
        known = self._frames
        after: list[tuple[str, str]] = []  # the library frames past the innermost user frame
        for frame_id in frame_ids:
            if frame_id not in known:
                frame = self._info.frames_by_id.get(frame_id)
                known[frame_id] = self._frame(frame) if frame is not None else None
            located = known[frame_id]
            if located is not None:
                frames.append(located)
                after = []
            else:
                frame = self._info.frames_by_id.get(frame_id)
                if frame is not None and len(after) < ENTRY_FRAMES:
                    index = frame.file_index
                    path = self._files[index] if 0 <= index < len(self._files) else ""
                    after.append((path, frame.func))
        return innermost_with_callers(frames, library_entry(after))

    def _frame(self, frame: Any) -> tuple[str, int, str | None] | None:
        """(file, line, function) of a user frame; None for a library's."""
        index = frame.file_index
        path = self._files[index] if 0 <= index < len(self._files) else ""
        return (path, frame.line, frame.func or None) if is_user_file(path) else None


# How many library frames past the user's are enough to tell which library made an op.
ENTRY_FRAMES = 8


def innermost_with_callers(
    frames: list[tuple[str, int, str | None]], inside: str | None = None
) -> SourceLocation | None:
    """The last of the user's (file, line, function) frames, outermost first, with the others
    as its callers; `inside`: the library that made the op there, if not the user's call."""
    if not frames:
        return None
    callers = tuple(SourceLocation(*frame) for frame in frames[:-1])
    return SourceLocation(*frames[-1], callers=callers, inside=inside)


def made_by_a_library(frames: Sequence[Any]) -> bool:
    """Whether the stack `frames` (outermost first) that created a variable went from the
    user's innermost frame through a library other than TensorFlow itself: Keras's layers and
    step counters, TensorFlow Probability's seeds, TF-MOT's clones. Unless a model or module
    of the user owns it, such a variable is the library's bookkeeping, no candidate."""
    after: list[str] = []
    for frame in frames:
        filename = getattr(frame, "filename", "") or ""
        if is_user_file(filename):
            after = []
        else:
            after.append(filename)
    return any(_in_a_library(filename) for filename in after)


def _in_a_library(filename: str) -> bool:
    installed = _INSTALLED[0] in filename or _INSTALLED[1] in filename
    return installed and not any(own in filename for own in _NOT_A_LIBRARY)


_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
# TensorFlow creates every variable (its frames are the creation's, not a library's).
_NOT_A_LIBRARY = (f"{os.sep}tensorflow{os.sep}", f"{os.sep}gradcheck_cli{os.sep}")


def call_column(frame: FrameType) -> int | None:
    """Where the call `frame` is running starts on its line (UTF-8 bytes, as `ast` counts),
    from Python's own positions; None when Python keeps none (`-X no_debug_ranges`)."""
    instruction = frame.f_lasti // 2  # a code unit is two bytes
    positions = next(itertools.islice(frame.f_code.co_positions(), instruction, None), None)
    if positions is None:
        return None
    line, _, column, _ = positions
    return column if line == frame.f_lineno else None


def with_call_column(
    location: SourceLocation | None, frame: FrameType | None
) -> SourceLocation | None:
    """`location`, a user frame's line on the stack of a call that is creating a variable, with
    the column where that frame's call starts, read off the live frames from `frame` outward:
    it tells which call of a line of several created the variable."""
    while location is not None and frame is not None:
        if frame.f_code.co_filename == location.file and frame.f_lineno == location.line:
            return replace(location, column=call_column(frame))
        frame = frame.f_back
    return location
