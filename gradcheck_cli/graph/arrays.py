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
from typing import Any
from weakref import WeakKeyDictionary

from gradcheck_cli.graph.flat_nodes import FlatNodes, Tables
from gradcheck_cli.graph.model import CARRIES_GRADIENT, Body, Node, TensorRef


class BodyArrays:
    """The flat form of one body (see the module's docstring)."""

    def __init__(
        self, body: Body, extra: Iterable[TensorRef] = (), calls_as: bytes | None = None
    ) -> None:
        """`extra`: tensors read from outside the body besides its rets (the loss);
        `calls_as`: what stands for the nodes' calls in the structure the body shares (see
        `shared_structure`)."""
        self.flat = flat = body.nodes
        self.ids = ids = flat.ids
        self.outside: dict[TensorRef, int] = {}
        refs = (*body.rets, *extra)
        numbered = [(ids.get(ref.node), ref.index) for ref in refs]
        inside = not flat.outside and all(n is not None for n, _ in numbered)
        if inside and len(flat) <= SHARED_STRUCTURES:
            structure = shared_structure(flat, numbered, len(body.rets), calls_as)
        else:
            structure = self._structure(body, refs, numbered)
        self.structure = structure
        self.widths = structure.widths
        self.offsets = structure.offsets
        self.rets = structure.rets
        self.input_tensors = structure.input_tensors
        # Per edge, the node that makes its tensor (negative from outside) and the node it
        # enters.
        self.input_nodes = flat.input_producers
        self.input_start = flat.input_start
        self.edge_nodes = structure.edge_nodes
        self.tensor_count = structure.tensor_count

    def _structure(
        self, body: Body, refs: Sequence[TensorRef], numbered: list[tuple[int | None, int]]
    ) -> Structure:
        """The numbers of this body, which may read tensors from outside it (a malformed
        graph): those are numbered past the nodes' own, so that every edge has a tensor."""
        flat = self.flat
        structure = Structure(flat, [(n, index) for n, index in numbered if n is not None], 0)
        known = structure.tensor_count
        if flat.outside:
            input_tensors = structure.input_tensors
            for edge, (producer, index) in enumerate(zip(flat.input_producers, flat.input_indices)):
                if producer < 0:
                    ref = TensorRef(flat.producer_name(producer), index)
                    input_tensors[edge] = self._outside(ref, known)
        for ref, (n, _) in zip(refs, numbered):
            if n is None:
                self._outside(ref, known)
        structure.tensor_count = known + len(self.outside)
        offsets = structure.offsets
        structure.rets = [
            offsets[n] + index if n is not None else self.outside[ref]
            for ref, (n, index) in zip(body.rets, numbered)
        ]
        return structure

    @property
    def reader_start(self) -> array[int]:
        """Per tensor number, where its readers start in `reader_edges` (CSR)."""
        return self._reader_arrays()[0]

    @property
    def reader_edges(self) -> array[int]:
        """The edges that read each tensor, in edge order, tensor after tensor."""
        return self._reader_arrays()[1]

    def _reader_arrays(self) -> tuple[array[int], array[int]]:
        structure = self.structure
        if structure.readers is None:
            structure.readers = _readers(self.input_tensors, self.tensor_count)
        return structure.readers

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
        structure = self.structure
        if structure.producers is None:
            widths = self.widths
            producers = array("q", chain.from_iterable(map(repeat, range(len(widths)), widths)))
            producers.extend(repeat(-1, self.tensor_count - len(producers)))
            structure.producers = producers
        return structure.producers

    def carries_gradient(self) -> bytearray:
        """Per tensor, 1 if its dtype can carry gradient (an undeclared output is given the
        benefit of the doubt, like an unknown producer)."""
        carries = bytearray(b"\x01") * self.tensor_count
        blocked = self.flat.signature_table.each(_blocked_outputs)
        for signature, start in zip(self.flat.signatures, self.offsets):
            for k in blocked[signature]:
                carries[start + k] = 0
        return carries

    def outputs_carry_gradient(self) -> bytes:
        """Per node, 1 if every output it declares can carry gradient (`carries_gradient`)."""
        carrying = self.flat.signature_table.each(_all_carry_gradient)
        return bytes(map(carrying.__getitem__, self.flat.signatures))

    # -- views by TensorRef -------------------------------------------------------------------

    def readers(self) -> Readers:
        return Readers(self)

    def read(self) -> TensorSet:
        """The tensors some node reads or the body returns."""
        marks = bytearray(self.tensor_count)
        for t in (*self.input_tensors, *self.rets):
            marks[t] = 1
        return TensorSet(self, marks)


def _blocked_outputs(dtypes: tuple[str | None, ...]) -> list[int]:
    """The outputs of an output signature that cannot carry gradient."""
    return [k for k, dtype in enumerate(dtypes) if dtype not in CARRIES_GRADIENT]


def _all_carry_gradient(dtypes: tuple[str | None, ...]) -> bool:
    """Whether every output of an output signature can carry gradient."""
    return not _blocked_outputs(dtypes)


class Structure:
    """What a body's arrays hold apart from its names: how wide each node is, the tensor each
    edge reads, which node each edge enters, the rets' tensors, and (`memo`) what the walkers
    learn from these numbers alone. Bodies of one structure share one (`shared_structure`)."""

    def __init__(self, flat: FlatNodes, numbered: list[tuple[int, int]], rets: int) -> None:
        """`numbered`: the (node number, output index) of the rets (the first `rets` of them)
        and of the tensors read from outside the body; an edge from a node the body does not
        hold reads tensor 0 (`BodyArrays._structure` numbers those)."""
        producers, indices = flat.input_producers, flat.input_indices
        # How many outputs each node has: its declared ones and any that is read.
        widths = list(map(flat.signature_table.each(len).__getitem__, flat.signatures))
        inside = not flat.outside  # no input from outside the body
        if not inside or any(map(operator.ge, indices, map(widths.__getitem__, producers))):
            for producer, index in zip(producers, indices):
                if producer >= 0 and index >= widths[producer]:
                    widths[producer] = index + 1
        for n, index in numbered:
            if index >= widths[n]:
                widths[n] = index + 1
        self.widths = widths
        self.offsets = offsets = array("q", [0, *accumulate(widths)])
        if inside:
            self.input_tensors = array(
                "q", map(operator.add, map(offsets.__getitem__, producers), indices)
            )
        else:
            self.input_tensors = array(
                "q",
                (offsets[p] + i if p >= 0 else 0 for p, i in zip(producers, indices)),
            )
        starts = flat.input_start
        counts = map(operator.sub, starts[1:], starts)
        self.edge_nodes = array("q", chain.from_iterable(map(repeat, range(len(flat)), counts)))
        self.tensor_count = offsets[-1]
        self.rets = [offsets[n] + index for n, index in numbered[:rets]]
        self.readers: tuple[array[int], array[int]] | None = None  # the backward pass needs none
        self.producers: array[int] | None = None
        # Facts of these numbers alone, by the walker's key (`BodyIndex`): nothing of a name,
        # a source line or a shape may go in, since bodies of other names share them.
        self.memo: dict[object, Any] = {}


SHARED_STRUCTURES = 4096
"""Bodies of at most this many nodes share their `Structure` with the bodies of the same
numbers: the functions of one layer, of one loop or of one branch are often alike."""


def shared_structure(
    flat: FlatNodes, numbered: list[tuple[int, int]], rets: int, calls_as: bytes | None = None
) -> Structure:
    """The structure of a body of nodes `flat`, shared by every body of the same numbers (op
    types, signatures, calls, attributes, gradient overrides, inputs, rets and extra tensors
    `numbered`) that `flat`'s builder made; kept from the second body of a structure on.
    `calls_as`, when given, stands for the calls: bodies that call other functions alike then
    share one, and their `memo` holds only what does not depend on which functions they call
    beyond what `calls_as` tells."""
    parts = (
        flat.op_types,
        flat.signatures,
        flat.calls if calls_as is None else calls_as,
        flat.attrs,
        flat.input_start,
        flat.input_producers,
        flat.input_indices,
        array("q", sorted(flat.gradient_op_types)) if flat.gradient_op_types else b"",
        array("q", [rets, *chain.from_iterable(numbered)]),
    )
    # Each part's length first: parts of other lengths never make the same bytes. The bytes
    # are the key: two structures are one only if every number is the same.
    key = b"".join((array("q", map(len, parts)), b"" if calls_as is None else b"as", *parts))
    known = _STRUCTURES.get(flat.tables)
    if known is None:
        known = _STRUCTURES[flat.tables] = ({}, set())
    kept, met = known
    structure = kept.get(key)
    if structure is None:
        structure = Structure(flat, numbered, rets)
        digest = hash(key)  # a structure met once is known by its hash alone
        if digest in met:
            kept[key] = structure
        else:
            met.add(digest)
    return structure


_STRUCTURES: WeakKeyDictionary[Tables, tuple[dict[bytes, Structure], set[int]]] = (
    WeakKeyDictionary()
)
"""The structures of a builder's bodies met more than once (and the hashes of those met
once), by the tables the builder numbers its nodes in."""


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
