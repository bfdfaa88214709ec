"""Record the eager reads of variables outside the loss, and the tensors computed from them."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.worker.protocol import TracedFunction

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
