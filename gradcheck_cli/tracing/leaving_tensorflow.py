"""Eager values outside what a loss traces or a tape records: where the script's own code turns
a TensorFlow value into a Python or NumPy value (a leave), and the eager reads of variables that
values computed outside the loss were made from (a read)."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from gradcheck_cli.differentiability.function_ops import is_dataset_op
from gradcheck_cli.differentiability.reasons import LEAVE_WORDS
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.worker.protocol import TracedFunction

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
    """The frame that called a hooked method (past the hook and its wrapper, and past a
    library's method of the same kind that hands the call on: a Keras variable's `numpy()`
    reads its tf.Variable's), if it is the script's own: a value that leaves TensorFlow
    inside a library is the library's business."""
    from gradcheck_cli.source_code.debug_info import is_user_file

    frame: Any = sys._getframe(3)
    for _ in range(3):
        if frame is None or is_user_file(frame.f_code.co_filename):
            break
        if frame.f_code.co_name not in (*LEAVING_METHODS, TRUTH_VALUE):
            return None
        frame = frame.f_back
    if frame is None or not is_user_file(frame.f_code.co_filename):
        return None
    return SourceLocation(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def first_leave(leaves: list[Leave], since: int) -> Leave | None:
    """The first value that left TensorFlow since the tape opened; a tensor used as a truth
    value (`if`, `max()`) only when nothing left as a number or an array."""
    recent = [leave for leave in leaves if leave.clock >= since]
    numbers = [leave for leave in recent if leave.method != TRUTH_VALUE]
    return (numbers or recent or [None])[0]


Read = tuple[int, SourceLocation | None]  # (id of the variable's handle, the line that read it)


@dataclass
class EagerReads:
    """Which live tensors were computed from which eager reads of variables. A tensor's id
    stands for it only while it lives: a weak reference drops the entry when TensorFlow frees
    the tensor and Python may reuse the id."""

    _derived: dict[int, tuple[weakref.ref[Any], frozenset[Read]]] = field(default_factory=dict)
    # With `lines`: every live eager tensor -> the script's line whose op made it.
    lines: bool = False
    _made: dict[int, tuple[weakref.ref[Any], SourceLocation | None]] = field(default_factory=dict)
    # id of a resource handle (a variable's) -> the first tf.data op that took it in (a
    # Dataset.map function that reads the variable captures it), by op type and line.
    datasets: dict[int, tuple[str, SourceLocation | None]] = field(default_factory=dict)

    def on_op(
        self,
        op_type: Any,
        inputs: Any,
        attrs: Any,
        outputs: Any,
        op_name: Any = None,
        graph: Any = None,
    ) -> None:
        if graph is not None or not outputs:
            return None
        kind = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        if is_dataset_op(kind):
            for tensor in inputs or ():
                if getattr(tensor, "dtype", None) is not None and tensor.dtype.name == "resource":
                    self.datasets.setdefault(id(tensor), (kind, _user_line()))
        reads: set[Read] = set()
        for tensor in inputs or ():
            entry = self._derived.get(id(tensor))
            if entry is not None:
                reads |= entry[1]
            elif getattr(tensor, "dtype", None) is not None and tensor.dtype.name == "resource":
                reads.add((id(tensor), _user_line()))
        if reads:
            for tensor in outputs:
                self._remember(tensor, frozenset(reads))
        if self.lines:
            where = _user_line()
            made = self._made
            for tensor in outputs:
                key = id(tensor)
                try:
                    reference = weakref.ref(tensor, lambda _, key=key: made.pop(key, None))
                except TypeError:
                    continue
                made[key] = (reference, where)
        return None

    def made_at(self, tensor: Any) -> SourceLocation | None:
        """The script's line whose eager op made the live `tensor` (with `lines`)."""
        entry = self._made.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def _remember(self, tensor: Any, reads: frozenset[Read]) -> None:
        key = id(tensor)
        derived = self._derived
        try:
            reference = weakref.ref(tensor, lambda _, key=key: derived.pop(key, None))
        except TypeError:  # not a tensor we can follow
            return
        derived[key] = (reference, reads)

    def reads_behind(self, tensor: Any) -> frozenset[Read]:
        """The eager reads the live `tensor` was computed from."""
        entry = self._derived.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else frozenset()


@contextmanager
def recording_eager_reads() -> Iterator[EagerReads]:
    """The eager reads of variables inside the block (importing the script, its `build()`)."""
    from tensorflow.python.framework import op_callbacks

    reads = EagerReads()
    op_callbacks.add_op_callback(reads.on_op)
    try:
        yield reads
    finally:
        op_callbacks.remove_op_callback(reads.on_op)


def mark_frozen_reads(
    result: TracedFunction, variables: Sequence[Any], concrete: Any, reads: EagerReads
) -> None:
    """Give each variable the loss never reads, but whose eagerly computed value the function
    captured (as a constant), the line where it was read (`result.variables` pairs with
    `variables`, in order)."""
    read_at: dict[int, SourceLocation] = {}
    for external, _ in concrete.graph.captures:
        if getattr(external, "dtype", None) is None or external.dtype.name == "resource":
            continue
        for handle, location in reads.reads_behind(external):
            if location is not None and (handle not in read_at or location < read_at[handle]):
                read_at[handle] = location
    for record, variable in zip(result.variables, variables):
        if record.arg_index is None:
            record.variable.read_before_tracing = read_at.get(id(variable.handle))


def _user_line() -> SourceLocation | None:
    """The innermost frame of the script's own code, with the script's frames that called it
    (a frame walk: this runs on every read)."""
    from gradcheck_cli.source_code.debug_info import is_user_file

    found = []
    frame = sys._getframe(1)
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            code = frame.f_code
            found.append(SourceLocation(code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    if not found:
        return None
    return replace(found[0], callers=tuple(reversed(found[1:])))
