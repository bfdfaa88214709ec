"""A body's nodes held as flat arrays, read as a mapping of `Node`s made on each access.

A million `Node` objects, with a tuple of `TensorRef`s each, cost about 300 bytes a node
beyond their names. Here a node is a number: its op type, output signature, calls and
attributes are numbers into tables of the distinct ones, its inputs a slice of two integer
arrays (CSR: the producer's number and the output index), and what few nodes have (a gradient
override, a source line, static shapes) sits in a dict by number. `nodes[name]` builds the
`Node` the rest of gradcheck reads, and lets it go when the reader does.

The builder appends nodes in order (`append`), may set inputs it could not resolve at once
(`set_input`), and calls `finish()`, which numbers the producers that were not added yet
when their readers were.
"""

from __future__ import annotations

import itertools
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from gradcheck_cli.graph.model import Node, SourceLocation, TensorRef

T = TypeVar("T")
R = TypeVar("R")

Numbers = tuple[int, int, int, int]
"""A node's numbers in the tables: op type, output signature, calls, attributes."""

RECENT_NODES = 4096
"""How many of the nodes last made a model keeps made."""

_SERIALS = itertools.count()


class Table(Generic[T]):
    """Distinct values, numbered in the order first met. `key` makes a value hashable (a dict
    by its items); a value that still cannot be hashed gets a number of its own."""

    def __init__(self, key: Callable[[T], Any] | None = None) -> None:
        self.values: list[T] = []
        self._numbers: dict[Any, int] = {}
        self._key = key
        self._by_identity: dict[int, int] = {}
        self._each: dict[Callable[[Any], Any], list[Any]] = {}

    def each(self, make: Callable[[T], R]) -> list[R]:
        """`make(value)` for every value, by number: each made once, as the table grows (the
        bodies of a model read these lists without a step per value of the table)."""
        made = self._each.get(make)
        if made is None:
            made = self._each[make] = []
        if len(made) < len(self.values):
            made.extend(map(make, self.values[len(made) :]))
        return made

    def find(self, value: T) -> int:
        """The number of `value`; -1 if the table does not hold it (nothing is added)."""
        try:
            found = self._numbers.get(self._key(value) if self._key is not None else value)
        except TypeError:
            return -1
        return -1 if found is None else found

    def number(self, value: T) -> int:
        if self._key is None:
            return self._number(value)
        # Nodes of one kind share their dicts: a dict the table holds is numbered by itself,
        # without making its key (only the table's own values are remembered so).
        known = self._by_identity.get(id(value))
        if known is not None and self.values[known] is value:
            return known
        number = self._number(value)
        if self.values[number] is value:
            self._by_identity[id(value)] = number
        return number

    def _number(self, value: T) -> int:
        try:
            key = self._key(value) if self._key is not None else value
            found = self._numbers.get(key)
        except TypeError:
            self.values.append(value)
            return len(self.values) - 1
        if found is None:
            found = self._numbers[key] = len(self.values)
            self.values.append(value)
        return found


def _items(mapping: Mapping[str, Any]) -> Any:
    return tuple(sorted(mapping.items()))


_EMPTY: dict[str, Any] = {}


class RecentNodes:
    """The `Node`s last made, of any body of a model: a walk asks for a node, then for its
    neighbours, then for it again, so the few thousand last made serve most asks."""

    def __init__(self, size: int = RECENT_NODES) -> None:
        self._nodes: OrderedDict[tuple[int, int], Node] = OrderedDict()
        self._size = size

    def get(self, flat: FlatNodes, n: int) -> Node:
        key = (flat.serial, n)
        node = self._nodes.get(key)
        if node is None:
            node = self._nodes[key] = flat.make(n)
            if len(self._nodes) > self._size:
                self._nodes.popitem(last=False)
        else:
            self._nodes.move_to_end(key)
        return node


class Tables:
    """The tables of distinct op types, output signatures, calls and attributes, shared by the
    bodies one builder makes, and the nodes last made of those bodies. Number 0 of calls and
    of attributes is the empty dict."""

    def __init__(self) -> None:
        self.recent = RecentNodes()
        self.op_types: Table[str] = Table()
        self.signatures: Table[tuple[str | None, ...]] = Table()
        self.calls: Table[dict[str, tuple[str, ...]]] = Table(_items)
        self.attrs: Table[dict[str, object]] = Table(_items)
        self.calls.number(_EMPTY)
        self.attrs.number(_EMPTY)

    def number(
        self,
        op_type: str,
        output_dtypes: tuple[str | None, ...],
        calls: dict[str, tuple[str, ...]] | None,
        attrs: dict[str, object] | None,
    ) -> Numbers:
        """The numbers of a node's op type, output signature, calls and attributes."""
        return (
            self.op_types.number(op_type),
            self.signatures.number(output_dtypes),
            self.calls.number(calls) if calls else 0,
            self.attrs.number(attrs) if attrs else 0,
        )


class FlatNodes(Mapping[str, Node]):
    """The nodes of one body (see the module's docstring)."""

    def __init__(self, tables: Tables | None = None) -> None:
        self.tables = tables = tables or Tables()
        self.serial = next(_SERIALS)  # names the body in `RecentNodes`, never reused
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self.op_types = array("i")
        self.op_table = tables.op_types
        self.signatures = array("i")
        self.signature_table = tables.signatures
        self.calls = array("i")
        self.calls_table = tables.calls
        self.attrs = array("i")
        self.attrs_table = tables.attrs
        self.gradient_op_types: dict[int, str] = {}
        self.locations: dict[int, SourceLocation] = {}
        self.output_shapes: dict[int, tuple[tuple[int | None, ...] | None, ...]] = {}
        self.input_start = array("q", [0])
        # Per input edge: the producer's number (-1 - k for the k-th name the body does not
        # hold), and the output index. A producer not added yet when its reader is stays named
        # (by edge) until `finish()` numbers it.
        self.input_producers = array("i")
        self.input_indices = array("q")
        self.constant_inputs = bytearray()
        self.outside: list[str] = []
        self._later: dict[int, str] | None = {}

    # -- building -----------------------------------------------------------------------------

    def append(
        self,
        name: str,
        op_type: str,
        inputs: Iterable[tuple[str, int]] = (),
        output_dtypes: tuple[str | None, ...] = (),
        calls: dict[str, tuple[str, ...]] | None = None,
        gradient_op_type: str | None = None,
        attrs: dict[str, object] | None = None,
        location: SourceLocation | None = None,
        output_shapes: tuple[tuple[int | None, ...] | None, ...] = (),
        constant_inputs: tuple[bool, ...] = (),
    ) -> int:
        """Add a node (its inputs as (producer name, output index), numbered at `finish()`);
        its number."""
        refs = inputs if isinstance(inputs, list) else list(inputs)
        producers, later = self.producer_numbers([ref[0] for ref in refs])
        self.append_numbered(
            name,
            self.tables.number(op_type, output_dtypes, calls, attrs),
            producers,
            [ref[1] for ref in refs],
            later,
            gradient_op_type,
            location,
            output_shapes,
        )
        first = self.input_start[-2]
        self.constant_inputs += bytes(len(self.input_producers) - len(self.constant_inputs))
        for k, flag in enumerate(constant_inputs[: len(refs)]):
            self.constant_inputs[first + k] = bool(flag)
        return len(self.names) - 1

    def producer_numbers(self, names: list[str]) -> tuple[list[int], list[tuple[int, str]]]:
        """The numbers of the nodes `names` for `append_numbered`: a node not added yet is
        numbered -1, and named by its position in the second list."""
        ids = self.ids
        numbers = [ids.get(name, -1) for name in names]
        later = [(k, name) for k, name in enumerate(names) if numbers[k] < 0]
        return numbers, later

    def append_numbered(
        self,
        name: str,
        numbers: Numbers,
        producers: list[int],
        indices: list[int],
        later: list[tuple[int, str]] | None = None,
        gradient_op_type: str | None = None,
        location: SourceLocation | None = None,
        output_shapes: tuple[tuple[int | None, ...] | None, ...] = (),
    ) -> None:
        """`append` for a builder that numbered the node's op type, signature, calls and
        attributes itself (`Tables.number`), and gives its inputs as two lists: the producers'
        node numbers and the output indices; `later`: (position, name) of the producers not
        added yet (`finish()` numbers them). The way a million nodes are added."""
        assert self._later is not None, "finished"
        n = len(self.names)
        self.names.append(name)
        self.ids[name] = n
        op_type, signature, calls, attrs = numbers
        self.op_types.append(op_type)
        self.signatures.append(signature)
        self.calls.append(calls)
        self.attrs.append(attrs)
        if gradient_op_type is not None:
            self.gradient_op_types[n] = gradient_op_type
        if location is not None:
            self.locations[n] = location
        if output_shapes:
            self.output_shapes[n] = output_shapes
        count = len(producers)
        first = self.input_start[-1]
        if count:
            self.input_producers.extend(producers)
            self.input_indices.extend(indices)
            if later:
                for k, producer in later:
                    self._later[first + k] = producer
        self.input_start.append(first + count)

    def append_inputless(self, names: list[str], numbers: list[Numbers]) -> None:
        """`append_numbered` for nodes without inputs (a function's arguments), all at once:
        node `names[k]` of the numbers `numbers[k]`. The names are new (the caller checks)."""
        assert self._later is not None, "finished"
        first = len(self.names)
        self.names.extend(names)
        self.ids.update(zip(names, range(first, first + len(names))))
        columns = (self.op_types, self.signatures, self.calls, self.attrs)
        for column, values in zip(columns, zip(*numbers)):
            column.extend(values)
        self.input_start.extend(itertools.repeat(self.input_start[-1], len(names)))

    def set_input(self, edge: int, ref: TensorRef) -> None:
        """Input edge number `edge` reads `ref` (before `finish()`)."""
        assert self._later is not None, "finished"
        self._later[edge] = ref[0]
        self.input_indices[edge] = ref[1]

    def finish(self) -> FlatNodes:
        """Number the producers that were named; no node is added after."""
        later = self._later
        assert later is not None, "finished twice"
        # One flag per input edge (`append_numbered` leaves them to here).
        self.constant_inputs += bytes(len(self.input_producers) - len(self.constant_inputs))
        ids = self.ids
        outside: dict[str, int] = {}
        producers = self.input_producers
        for edge in sorted(later):  # names the body does not hold, numbered in edge order
            name = later[edge]
            n = ids.get(name)
            if n is None:
                n = outside.get(name)
                if n is None:
                    n = outside[name] = -1 - len(self.outside)
                    self.outside.append(name)
            producers[edge] = n
        self._later = None
        return self

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> FlatNodes:
        """The flat form of these nodes."""
        flat = cls()
        for node in nodes:
            flat.append(
                node.name,
                node.op_type,
                node.inputs,
                node.output_dtypes,
                node.calls,
                node.gradient_op_type,
                node.attrs,
                node.location,
                node.output_shapes,
                node.constant_inputs,
            )
        return flat.finish()

    # -- reading ------------------------------------------------------------------------------

    def producer_name(self, producer: int) -> str:
        return self.names[producer] if producer >= 0 else self.outside[-1 - producer]

    def op_type(self, n: int) -> str:
        return self.op_table.values[self.op_types[n]]

    def kind(self, n: int) -> Numbers:
        """The numbers of node `n`'s op type, output signature, calls and attributes."""
        return self.op_types[n], self.signatures[n], self.calls[n], self.attrs[n]

    def input_dtypes(self, n: int) -> tuple[str | None, ...]:
        """The dtype of each input of node `n` (None when its producer does not declare it),
        as `Body.input_dtype` reads them."""
        signatures, dtypes = self.signatures, self.signature_table.values
        found: list[str | None] = []
        for edge in range(self.input_start[n], self.input_start[n + 1]):
            producer, index = self.input_producers[edge], self.input_indices[edge]
            declared = dtypes[signatures[producer]] if producer >= 0 else ()
            found.append(declared[index] if index < len(declared) else None)
        return tuple(found)

    def output_dtypes(self, n: int) -> tuple[str | None, ...]:
        return self.signature_table.values[self.signatures[n]]

    def input_refs(self, n: int) -> tuple[TensorRef, ...]:
        start, stop = self.input_start[n], self.input_start[n + 1]
        if start == stop:
            return ()
        names, outside = self.names, self.outside
        return tuple(
            TensorRef(names[p] if p >= 0 else outside[-1 - p], i)
            for p, i in zip(self.input_producers[start:stop], self.input_indices[start:stop])
        )

    def node(self, n: int) -> Node:
        """Node number `n`: made on access, or one of the nodes last made (`RecentNodes`)."""
        return self.tables.recent.get(self, n)

    def make(self, n: int) -> Node:
        """A new `Node` for node number `n`."""
        start, stop = self.input_start[n], self.input_start[n + 1]
        return Node(
            self.names[n],
            self.op_table.values[self.op_types[n]],
            self.input_refs(n),
            self.signature_table.values[self.signatures[n]],
            self.calls_table.values[self.calls[n]],
            self.gradient_op_types.get(n),
            self.attrs_table.values[self.attrs[n]],
            self.locations.get(n),
            self.output_shapes.get(n, ()),
            tuple(map(bool, self.constant_inputs[start:stop])),
        )

    def edges_from(self, producers: Mapping[int, Any]) -> Iterator[tuple[int, int]]:
        """(edge, reading node's number) for every input edge whose producer is one of
        `producers` (node numbers, or -1 - k for outside names), in edge order."""
        starts = self.input_start
        n = 0
        for edge, producer in enumerate(self.input_producers):
            if producer in producers:
                while starts[n + 1] <= edge:
                    n += 1
                yield edge, n

    def functions_named(self) -> set[str]:
        """The functions the nodes name (a callee, a branch, a loop's body or condition)."""
        table = self.calls_table.values
        return {
            name
            for number in set(self.calls)
            if number  # number 0: no calls
            for names in table[number].values()
            for name in names
        }

    def numbers_of_types(self, op_types: Iterable[str]) -> list[int]:
        """The numbers of the nodes of these op types, in order."""
        numbers = {self.op_table.find(op) for op in op_types}
        found: list[int] = []
        for number in numbers:  # each found by C-speed scans, not a step per node
            if number >= 0:
                found.extend(positions(self.op_types, number))
        return sorted(found)

    def __getitem__(self, name: str) -> Node:
        return self.node(self.ids[name])

    def get(self, name: str, default: Any = None) -> Any:
        n = self.ids.get(name)
        return self.node(n) if n is not None else default

    def __contains__(self, name: object) -> bool:
        return name in self.ids

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def values(self) -> _Nodes:  # type: ignore[override]
        """Every node, in order, each made as the iteration reaches it."""
        return _Nodes(self)


def positions(values: array[int], value: int) -> Iterator[int]:
    """Where `value` is in `values`, in order: found by C-speed scans, not a step per item."""
    start = 0
    while True:
        try:
            start = values.index(value, start)
        except ValueError:
            return
        yield start
        start += 1


class _Nodes:
    def __init__(self, flat: FlatNodes) -> None:
        self._flat = flat

    def __iter__(self) -> Iterator[Node]:
        return map(self._flat.node, range(len(self._flat)))

    def __len__(self) -> int:
        return len(self._flat)
