"""Record where the script's own code turns a TensorFlow value into a Python or NumPy value."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gradcheck_cli.differentiability.reasons import LEAVE_WORDS
from gradcheck_cli.graph.model import SourceLocation

# The methods through which an eager value leaves TensorFlow: `.numpy()`, NumPy (`np.exp(t)`,
# `np.asarray(t)` call `__array__`), `float()`, `int()`, a tensor used as an index.
LEAVING_METHODS = ("numpy", "__array__", "__float__", "__int__", "__index__")
# A tensor used as a Python truth value (`if t:`, Python's `max(t1, t2)`) picks one value and
# drops the others: in a loss function that is a way out of TensorFlow too.
TRUTH_VALUE = "__bool__"


_MAX_LEAVES = 10_000


@dataclass(frozen=True)
class Leave:
    """A value that left TensorFlow in the script's own code (`.numpy()`, `float()`, NumPy)."""

    clock: int
    location: SourceLocation
    method: str

    @property
    def reason(self) -> str:
        return LEAVE_WORDS.get(self.method, "the value leaves TensorFlow")


@dataclass
class LeaveLog:
    """The leaves seen while gradcheck itself is not `busy`; `clock` counts every leave."""

    busy: Callable[[], bool] = lambda: False
    leaves: list[Leave] = field(default_factory=list)
    clock: int = 0

    def record(self, location: SourceLocation, method: str) -> None:
        """A value that left TensorFlow at `location` through a library's call (`predict`)."""
        if not self.busy():
            self.clock += 1
            if len(self.leaves) < _MAX_LEAVES:
                self.leaves.append(Leave(self.clock, location, method))

    def hook(self, method: str) -> Callable[..., Any]:
        """A hook for `method`, called as `hook(original, value, *args)` by a patch's wrapper."""

        def hook(original: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.busy():
                self.clock += 1
                location = _immediate_caller()
                if location is not None and len(self.leaves) < _MAX_LEAVES:
                    self.leaves.append(Leave(self.clock, location, method))
            return original(value, *args, **kwargs)

        return hook


def leaving_owners() -> tuple[Any, ...]:
    """The classes whose methods hand an eager value to Python: tensors and variables."""
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import resource_variable_ops

    return (ops._EagerTensorBase, resource_variable_ops.BaseResourceVariable)


@contextmanager
def recording_leaves() -> Iterator[LeaveLog]:
    """Every way out of TensorFlow taken by the script's own code inside the block."""
    log = LeaveLog()
    patches: list[tuple[Any, str, Any]] = []
    for owner in leaving_owners():
        for method in (*LEAVING_METHODS, TRUTH_VALUE):
            if method in vars(owner):
                patches.append((owner, method, vars(owner)[method]))
                setattr(owner, method, _patched(vars(owner)[method], log.hook(method)))
    try:
        yield log
    finally:
        for owner, method, original in reversed(patches):
            setattr(owner, method, original)


def _patched(original: Any, hook: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return hook(original, *args, **kwargs)

    wrapper.__name__ = getattr(original, "__name__", "wrapper")
    wrapper.__doc__ = getattr(original, "__doc__", None)
    return wrapper


def _immediate_caller() -> SourceLocation | None:
    """The frame that called a hooked method (past the hook and its wrapper), if it is the
    script's own: a value that leaves TensorFlow inside a library is the library's business."""
    from gradcheck_cli.source_code.debug_info import is_user_file

    frame = sys._getframe(3)
    if not is_user_file(frame.f_code.co_filename):
        return None
    return SourceLocation(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def first_leave(leaves: list[Leave], since: int) -> Leave | None:
    """The first value that left TensorFlow since the tape opened; a tensor used as a truth
    value (`if`, `max()`) only when nothing left as a number or an array."""
    recent = [leave for leave in leaves if leave.clock >= since]
    numbers = [leave for leave in recent if leave.method != TRUTH_VALUE]
    return (numbers or recent or [None])[0]
