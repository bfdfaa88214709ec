"""Record the eager reads of variables outside the loss, and the tensors computed from them."""

from __future__ import annotations

import traceback
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.loaders.worker_protocol import TracedFunction


@dataclass
class EagerReads:
    """Where each variable (by id of its handle) was first read eagerly, and which live tensors
    were computed from which reads. A tensor's id stands for it only while it lives: a weak
    reference drops the entry when TensorFlow frees the tensor and Python reuses the id."""

    read_at: dict[int, SourceLocation | None] = field(default_factory=dict)
    _derived: dict[int, tuple[weakref.ref[Any], frozenset[int]]] = field(default_factory=dict)

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
        handles: set[int] = set()
        for tensor in inputs or ():
            entry = self._derived.get(id(tensor))
            if entry is not None:
                handles |= entry[1]
            elif getattr(tensor, "dtype", None) is not None and tensor.dtype.name == "resource":
                handles.add(id(tensor))
                if id(tensor) not in self.read_at:
                    self.read_at[id(tensor)] = _user_line()
        if handles:
            for tensor in outputs:
                self._remember(tensor, frozenset(handles))
        return None

    def _remember(self, tensor: Any, handles: frozenset[int]) -> None:
        key = id(tensor)
        derived = self._derived
        try:
            reference = weakref.ref(tensor, lambda _, key=key: derived.pop(key, None))
        except TypeError:  # not a tensor we can follow
            return
        derived[key] = (reference, handles)

    def handles_behind(self, tensor: Any) -> frozenset[int]:
        """The variables (ids of their handles) the live `tensor` was computed from."""
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
    frozen: set[int] = set()
    for external, _ in concrete.graph.captures:
        if getattr(external, "dtype", None) is not None and external.dtype.name != "resource":
            frozen |= reads.handles_behind(external)
    for record, variable in zip(result.variables, variables):
        handle = id(variable.handle)
        if record.arg_index is None and handle in frozen:
            record.variable.read_before_tracing = reads.read_at.get(handle)


def _user_line() -> SourceLocation | None:
    from gradcheck_cli.loaders.traced import user_location

    return user_location(traceback.extract_stack())
