"""A body as flat integer arrays: what every walk of the analysis reads, built once per body.

Nodes are numbered in the body's order and tensors after them: output k of node n is tensor
`offsets[n] + k`. A node's inputs are a slice of one list (CSR: `input_start[n]` to
`input_start[n + 1]` in `input_tensors`), and so are a tensor's readers (`reader_start[t]` to
`reader_start[t + 1]` in `reader_edges`, edges numbered like `input_tensors`). A walk keeps its
marks in a list by tensor number instead of a dict entry per tensor: on a million ops that is a
few megabytes instead of hundreds, and an index instead of a hash per step.

`TensorRef`s stay the model's words for a tensor: `tensor(ref)` numbers one, `ref(t)` names
one, and the views (`Readers`, `TensorMap`, `TensorSet`) answer by `TensorRef` for the code
that explains what the walks found.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain, repeat

from gradcheck_cli.graph.flat_nodes import FlatNodes
from gradcheck_cli.graph.model import CARRIES_GRADIENT, Body, Node, TensorRef


class BodyArrays:
    """The flat form of one body (see the module's docstring)."""

    def __init__(self, body: Body, extra: Iterable[TensorRef] = ()) -> None:
        """`extra`: tensors read from outside the body besides its rets (the loss)."""
        flat = (
            body.nodes if isinstance(body.nodes, FlatNodes) else FlatNodes.of(body.nodes.values())
        )
        self.flat = flat
        self.ids = ids = flat.ids
        producers, indices = flat.input_producers, flat.input_indices
        # How many outputs each node has: its declared ones and any that is read.
        declared = [len(dtypes) for dtypes in flat.signature_table.values]
        widths = list(map(declared.__getitem__, flat.signatures))
        inside = not producers or min(producers) >= 0  # no input from outside the body
        if not inside or any(map(operator.ge, indices, map(widths.__getitem__, producers))):
            for producer, index in zip(producers, indices):
                if producer >= 0 and index >= widths[producer]:
                    widths[producer] = index + 1
        for ref in (*body.rets, *extra):
            n = ids.get(ref.node)
            if n is not None and ref.index >= widths[n]:
                widths[n] = ref.index + 1
        self.widths = widths
        self.offsets = offsets = array("q", [0, *accumulate(widths)])
        # Inputs from ops the body does not hold (a malformed graph) get tensors past the
        # nodes' own, so that every edge has a tensor.
        self.outside: dict[TensorRef, int] = {}
        known = offsets[-1]
        if inside:
            input_tensors = array(
                "q", map(operator.add, map(offsets.__getitem__, producers), indices)
            )
        else:
            input_tensors = array("q", bytes(8 * len(producers)))
            for edge, (producer, index) in enumerate(zip(producers, indices)):
                if producer >= 0:
                    input_tensors[edge] = offsets[producer] + index
                else:
                    ref = TensorRef(flat.producer_name(producer), index)
                    input_tensors[edge] = self._outside(ref, known)
        for ref in (*body.rets, *extra):
            if ref.node not in ids:
                self._outside(ref, known)
        self.rets = [t for ref in body.rets if (t := self.tensor(ref)) is not None]
        self.input_tensors = input_tensors
        # Per edge, the node that makes its tensor (negative from outside) and the node it
        # enters.
        self.input_nodes = producers
        self.input_start = starts = flat.input_start
        counts = map(operator.sub, starts[1:], starts)
        self.edge_nodes = array("q", chain.from_iterable(map(repeat, range(len(flat)), counts)))
        self.tensor_count = known + len(self.outside)
        self._readers: tuple[array[int], array[int]] | None = None  # the backward pass needs none
        self._producers: array[int] | None = None

    @property
    def reader_start(self) -> array[int]:
        """Per tensor number, where its readers start in `reader_edges` (CSR)."""
        return self._reader_arrays()[0]

    @property
    def reader_edges(self) -> array[int]:
        """The edges that read each tensor, in edge order, tensor after tensor."""
        return self._reader_arrays()[1]

    def _reader_arrays(self) -> tuple[array[int], array[int]]:
        if self._readers is None:
            self._readers = _readers(self.input_tensors, self.tensor_count)
        return self._readers

    def _outside(self, ref: TensorRef, known: int) -> int:
        return self.outside.setdefault(ref, known + len(self.outside))

    def node(self, n: int) -> Node:
        """Node number `n`."""
        return self.flat.node(n)

    def __len__(self) -> int:
        """How many nodes the body has."""
        return len(self.flat)

    # -- numbering ----------------------------------------------------------------------------

    def tensor(self, ref: TensorRef) -> int | None:
        """The number of tensor `ref`; None if the body neither makes nor reads it."""
        n = self.ids.get(ref[0])
        if n is None:
            return self.outside.get(ref)
        if ref[1] >= self.widths[n]:
            return None
        return self.offsets[n] + ref[1]

    def ref(self, tensor: int) -> TensorRef:
        """The name of tensor number `tensor`."""
        n = self.producer(tensor)
        if n < 0:
            return next(ref for ref, t in self.outside.items() if t == tensor)
        return TensorRef(self.flat.names[n], tensor - self.offsets[n])

    def producer(self, tensor: int) -> int:
        """The node that makes tensor number `tensor`; -1 for one from outside the body."""
        return self.tensor_producers()[tensor]

    def tensor_producers(self) -> array[int]:
        """Per tensor number, the node that makes it; -1 for one from outside the body."""
        if self._producers is None:
            widths = self.widths
            producers = array("q", chain.from_iterable(map(repeat, range(len(widths)), widths)))
            producers.extend(repeat(-1, self.tensor_count - len(producers)))
            self._producers = producers
        return self._producers

    def carries_gradient(self) -> bytearray:
        """Per tensor, 1 if its dtype can carry gradient (an undeclared output is given the
        benefit of the doubt, like an unknown producer)."""
        carries = bytearray(b"\x01") * self.tensor_count
        blocked = self._blocked_outputs()
        for signature, start in zip(self.flat.signatures, self.offsets):
            for k in blocked[signature]:
                carries[start + k] = 0
        return carries

    def outputs_carry_gradient(self) -> bytes:
        """Per node, 1 if every output it declares can carry gradient (`carries_gradient`)."""
        carrying = [not outputs for outputs in self._blocked_outputs()]
        return bytes(map(carrying.__getitem__, self.flat.signatures))

    def _blocked_outputs(self) -> list[list[int]]:
        """Per output signature, the outputs that cannot carry gradient."""
        return [
            [k for k, dtype in enumerate(dtypes) if dtype not in CARRIES_GRADIENT]
            for dtypes in self.flat.signature_table.values
        ]

    # -- views by TensorRef -------------------------------------------------------------------

    def readers(self) -> Readers:
        return Readers(self)

    def read(self) -> TensorSet:
        """The tensors some node reads or the body returns."""
        marks = bytearray(self.tensor_count)
        for t in (*self.input_tensors, *self.rets):
            marks[t] = 1
        return TensorSet(self, marks)


def _readers(input_tensors: array[int], count: int) -> tuple[array[int], array[int]]:
    """Per tensor, the edges that read it, in edge order (a counting sort)."""
    if len(input_tensors) >= NUMPY_READERS:
        return _readers_by_numpy(input_tensors, count)
    sizes = array("q", bytes(8 * (count + 1)))
    for t in input_tensors:
        sizes[t + 1] += 1
    start = array("q", accumulate(sizes))
    fill = start[:-1]
    edges = array("q", bytes(8 * len(input_tensors)))
    for edge, t in enumerate(input_tensors):
        edges[fill[t]] = edge
        fill[t] += 1
    return start, edges


NUMPY_READERS = 200_000
"""Bodies of at least this many edges sort their readers with NumPy (a tenth of the time of
the counting sort in Python, once its import is paid)."""


def _readers_by_numpy(input_tensors: array[int], count: int) -> tuple[array[int], array[int]]:
    """`_readers`, by a stable sort of the edges by the tensor each reads."""
    import numpy

    tensors = numpy.frombuffer(input_tensors, dtype=numpy.int64)
    starts = numpy.zeros(count + 1, dtype=numpy.int64)
    numpy.cumsum(numpy.bincount(tensors, minlength=count), out=starts[1:])
    edges = numpy.argsort(tensors, kind="stable").astype(numpy.int64, copy=False)
    start, order = array("q"), array("q")
    start.frombytes(starts.tobytes())
    order.frombytes(edges.tobytes())
    return start, order


class Readers:
    """Who reads each tensor, by `TensorRef`: `get(ref, default)` gives (node, input index)
    pairs in the body's order, as a dict of lists would."""

    def __init__(self, arrays: BodyArrays) -> None:
        self._arrays = arrays

    def get(
        self, ref: TensorRef, default: Sequence[tuple[Node, int]] = ()
    ) -> Sequence[tuple[Node, int]]:
        arrays = self._arrays
        t = arrays.tensor(ref)
        if t is None:
            return default
        edges = arrays.reader_edges[arrays.reader_start[t] : arrays.reader_start[t + 1]]
        if not edges:
            return default
        found = []
        for edge in edges:
            n = arrays.edge_nodes[edge]
            found.append((arrays.node(n), edge - arrays.input_start[n]))
        return found


class TensorMap:
    """An int per tensor (a walk's masks), read by `TensorRef` like a dict with 0 for absent."""

    def __init__(self, arrays: BodyArrays, values: list[int]) -> None:
        self.arrays = arrays
        self.values = values

    def get(self, ref: TensorRef, default: int | None = None) -> int | None:
        """The mask of `ref`, or `default` when it is 0 (a dict of masks holds no zeros)."""
        t = self.arrays.tensor(ref)
        value = self.values[t] if t is not None else 0
        return value if value else default


class TensorSet:
    """A set of tensors (marks by tensor number), asked by `TensorRef`."""

    def __init__(
        self, arrays: BodyArrays, marks: bytearray, unnumbered: frozenset[TensorRef] = frozenset()
    ) -> None:
        """`unnumbered`: members the body has no number for (an output no one reads of an op
        that declares none)."""
        self.arrays = arrays
        self.marks = marks
        self.unnumbered = unnumbered

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, tuple):  # a TensorRef, or the plain tuple equal to one
            return False
        t = self.arrays.tensor(TensorRef(*ref))
        return bool(self.marks[t]) if t is not None else ref in self.unnumbered
