"""Source locations from a GraphDebugInfo proto: the user's innermost frame, with its callers."""

from __future__ import annotations

import functools
import os
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.loaders.notebook import notebook_cell

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


class DebugInfoLocations:
    """Looks up `"<node>@<function>"` keys; frames run outermost first, innermost last."""

    def __init__(self, debug_info: Any) -> None:
        self._info = debug_info
        self._cache: dict[str, SourceLocation | None] = {}

    def __call__(self, node: str, function: str) -> SourceLocation | None:
        key = f"{node}@{function}"
        if key not in self._cache:
            self._cache[key] = self._resolve(key)
        return self._cache[key]

    def _resolve(self, key: str) -> SourceLocation | None:
        info = self._info
        frames: list[Any] = []
        if key in info.name_to_trace_id:
            trace = info.traces_by_id.get(info.name_to_trace_id[key])
            if trace is not None:
                frames = [info.frames_by_id[f] for f in trace.frame_id if f in info.frames_by_id]
        elif key in info.traces:
            frames = list(info.traces[key].file_line_cols)
        located = []
        for frame in frames:
            index = frame.file_index
            path = info.files[index] if 0 <= index < len(info.files) else ""
            if is_user_file(path):
                located.append((path, frame.line, frame.func or None))
        return innermost_with_callers(located)


def innermost_with_callers(frames: list[tuple[str, int, str | None]]) -> SourceLocation | None:
    """The last of the user's (file, line, function) frames, outermost first, with the others
    as its callers."""
    if not frames:
        return None
    callers = tuple(SourceLocation(*frame) for frame in frames[:-1])
    return SourceLocation(*frames[-1], callers=callers)
