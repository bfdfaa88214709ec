"""Turn TensorFlow FunctionDef and GraphDef protos into the graph model."""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import repeat
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.flat_nodes import FlatNodes, Numbers, Tables
from gradcheck_cli.graph.memory import without_cyclic_gc
from gradcheck_cli.graph.model import (
    ARG_OP,
    Body,
    SourceLocation,
    TensorRef,
)
from gradcheck_cli.graph.progress import NODES_PER_REPORT, BuiltCount, Progress, silent
from gradcheck_cli.protos.constant_inputs import mark_constant_inputs
from gradcheck_cli.protos.input_refs import (
    INDEX_DIGITS,
    Offsets,
    function_input,
    function_ref,
    graph_ref,
)
from gradcheck_cli.protos.limits import ExpansionBudget, Refused, malformed
from gradcheck_cli.protos.node_kinds import NodeKind, NodeKinds
from gradcheck_cli.protos.tf_protos import (
    cut_callees,
    dtype_name,
    parse_node_def,
    split_node_def,
)
from gradcheck_cli.source_code.op_expressions import OpLines, branch_of

LocationLookup = Callable[[str, str], "SourceLocation | None"]
"""(node name, function name or "" for a top-level graph) -> where the user's code made it."""
ShapeLookup = Callable[[str, str], "tuple[tuple[int | None, ...] | None, ...]"]
"""(node name, function name) -> the shapes of the node's outputs, as traced."""


class GraphBuilder:
    """Converts the functions reachable from a top function or graph, each once.

    Everything a node expands from its attributes (outputs from `num`, `N`, type lists, a
    callee's signature, output indices its consumers read) is drawn from `budget`; without
    one, the budget is proportional to the functions' serialized size. `locations` and
    `shapes` tell where the user's code made a node and its outputs' shapes (none without
    them). `what` names the input in refusals ("malformed SavedModel: ..."); `progress` hears
    how much is built, as it goes.
    """

    def __init__(
        self,
        functions: Mapping[str, Any],
        op_defs: Mapping[str, Any],
        locations: LocationLookup | None = None,
        *,
        shapes: ShapeLookup | None = None,
        budget: ExpansionBudget | None = None,
        what: str = "model",
        progress: Progress = silent,
    ) -> None:
        self._functions = functions
        self._op_defs = op_defs
        self._locations = locations
        self._op_lines = OpLines()
        self._shapes = shapes
        self._budget = budget or ExpansionBudget(sum(f.ByteSize() for f in functions.values()))
        self._sized_by_functions = budget is None
        self._what = what
        self._built = BuiltCount(progress)  # told after each function, every so many nodes
        self.bodies: dict[str, Body] = {}
        self.notes: list[str] = []
        self._kinds = NodeKinds(functions, op_defs, self.notes)
        # Kinds by (op type, serialized attributes), for NodeDefs kept serialized: a node
        # whose bytes after its name and inputs were met before is not parsed at all.
        # Each is kept with its numbers in the tables (`FlatNodes.kind`).
        self._kinds_by_bytes: dict[tuple[str, bytes], tuple[NodeKind, Numbers]] = {}
        self._kinds_met: set[int] = set()  # hashes of the (op type, bytes) met once
        # Kinds of nodes that call functions (a call, a cond, a loop), by op type and their
        # bytes around the callees' names (`cut_callees`): each such node names its own
        # callee, so its bytes are rarely met twice, yet its kind is its neighbours' but for
        # the functions it calls.
        self._kinds_by_callees: dict[tuple[str, tuple[bytes, ...]], NodeKind] = {}
        # The tables of op types, signatures, calls and attributes every body numbers into.
        self._tables = Tables()
        self._arg_numbers: dict[str | None, Numbers] = {}  # an argument's, by its dtype

    # -- entry points -----------------------------------------------------------------------

    def add_function(self, name: str) -> Body:
        """Convert function `name` and every function it calls, transitively."""
        with without_cyclic_gc():
            return self._add_function(name)

    def _add_function(self, name: str) -> Body:
        pending = [name]
        while pending:
            current = pending.pop()
            if current in self.bodies:
                continue
            fdef = self._functions.get(current)
            if fdef is None:
                self.notes.append(f"the body of function {current} is not in the model")
                continue
            body = self._function_body(fdef)
            self.bodies[current] = body
            self._built.body_done(len(body.nodes))
            pending.extend(self._callees(body))
        if name not in self.bodies:
            raise GradcheckError(f"the model is malformed: function {name} has no body")
        return self.bodies[name]

    def add_graph(self, graph_def: Any, name: str, loss: TensorRef) -> Body:
        """Convert a TF1 GraphDef into a body whose single ret is the loss."""
        with without_cyclic_gc():
            return self._add_graph(graph_def, name, loss)

    def _add_graph(self, graph_def: Any, name: str, loss: TensorRef) -> Body:
        if self._sized_by_functions:
            self._budget = ExpansionBudget(self._budget.serialized_bytes + graph_def.ByteSize())
        nodes = FlatNodes(self._tables)
        node_name = ""
        try:
            for count, node_def in enumerate(graph_def.node, 1):
                if not count % NODES_PER_REPORT:
                    self._built.tell(under_way=count)
                node_name, op, texts, kind, numbers = self._node_kind(node_def, "")
                inputs = [graph_ref(text) for text in texts if not text.startswith("^")]
                producers, later = nodes.producer_numbers([ref.node for ref in inputs])
                self._node(
                    nodes,
                    sys.intern(node_name),
                    op,
                    kind,
                    producers,
                    [ref.index for ref in inputs],
                    later,
                    "",
                    None,
                    numbers,
                )
        except Refused as refused:
            raise malformed(self._what, _where("node", node_name, ""), refused) from None
        body = Body(name=name, nodes=nodes.finish(), args=(), rets=(loss,))
        self._charge_read_outputs(body, "")
        mark_constant_inputs(body)
        self.bodies[name] = body
        self._built.body_done(len(nodes))
        for callee in self._callees(body):
            self.add_function(callee)
        return body

    # -- conversion -------------------------------------------------------------------------

    def _function_body(self, fdef: Any) -> Body:
        fn_name = fdef.signature.name
        nodes = FlatNodes(self._tables)
        # FunctionDef refs name an output *argument* ("MatMul:product:0"); they resolve to flat
        # output indices once the producer's output layout is known: `layouts` holds each
        # node's (output argument -> its first flat output), by node number.
        layouts: list[dict[str, int]] = []
        offsets = Offsets(nodes.ids, layouts)
        arg_names: list[str] = []
        arg_numbers: list[Numbers] = []
        for arg in fdef.signature.input_arg:
            try:
                dtype = dtype_name(arg.type) if arg.type else None
            except Refused as refused:
                raise malformed(
                    self._what, _where("argument", arg.name, fn_name), refused
                ) from None
            numbers = self._arg_numbers.get(dtype)
            if numbers is None:
                numbers = self._tables.number(ARG_OP, (dtype,), None, None)
                self._arg_numbers[dtype] = numbers
            arg_names.append(arg.name)
            arg_numbers.append(numbers)
        if len(set(arg_names)) < len(arg_names):
            raise malformed(
                self._what,
                _where("argument", _first_repeated(arg_names), fn_name),
                Refused("is the name of two nodes"),  # TensorFlow refuses it too
            )
        nodes.append_inputless(arg_names, arg_numbers)
        layouts.extend(repeat(_NO_OUTPUT_ARGUMENTS, len(arg_names)))
        # One pass: each node is parsed, converted and let go (a function may hold a million).
        waiting: list[tuple[int, list[str]]] = []  # (first edge, inputs) read before producers
        branch = branch_of(fn_name)
        ids = nodes.ids
        # Small functions of one shape name their nodes alike: one string per name for them
        # all. A large function's names are its own (interning them only costs).
        share_names = len(fdef.node_def) <= _SHARED_NAMES
        name = ""
        try:
            for count, node_def in enumerate(fdef.node_def, 1):
                if not count % NODES_PER_REPORT:
                    self._built.tell(under_way=count)
                name, op, texts, kind, numbers = self._node_kind(node_def, fn_name)
                if share_names:
                    name = sys.intern(name)
                producers: list[int] = []  # node numbers; -1 for one not added yet (`later`)
                indices: list[int] = []
                later: list[tuple[int, str]] = []
                unresolved = False
                for text in texts:
                    if text[:1] == "^":
                        continue
                    parts = text.split(":")
                    n = ids.get(parts[0])
                    if n is not None and len(parts) == 1:  # an argument, or a node's output 0
                        producers.append(n)
                        indices.append(0)
                        continue
                    if (
                        n is not None
                        and len(parts) == 3
                        and parts[2].isascii()
                        and parts[2].isdigit()
                        and len(parts[2]) < INDEX_DIGITS
                    ):
                        producers.append(n)
                        indices.append(layouts[n].get(parts[1], 0) + int(parts[2]))
                        continue
                    ref = function_input(text, offsets)
                    if ref is None:
                        unresolved = True
                        ref = _UNRESOLVED
                    n = ids.get(ref[0], -1)
                    if n < 0:
                        later.append((len(producers), ref[0]))
                    producers.append(n)
                    indices.append(ref[1])
                if unresolved:
                    waiting.append(
                        (nodes.input_start[-1], [text for text in texts if text[:1] != "^"])
                    )
                self._node(
                    nodes, name, op, kind, producers, indices, later, fn_name, branch, numbers
                )
                layouts.append(kind.offsets)
        except Refused as refused:
            raise malformed(self._what, _where("node", name, fn_name), refused) from None
        for first, texts in waiting:
            for edge, text in enumerate(texts, first):
                nodes.set_input(edge, function_ref(text, offsets))
        rets = tuple(function_ref(fdef.ret[out.name], offsets) for out in fdef.signature.output_arg)
        args = tuple(arg.name for arg in fdef.signature.input_arg)
        body = Body(name=fn_name, nodes=nodes.finish(), args=args, rets=rets)
        self._charge_read_outputs(body, fn_name)
        mark_constant_inputs(body)
        return body

    @contextmanager
    def _refusing(self, name: str, fn_name: str, kind: str = "node") -> Iterator[None]:
        """Name the node and function in any refusal raised while converting them."""
        try:
            yield
        except Refused as refused:
            raise malformed(self._what, _where(kind, name, fn_name), refused) from None

    def _charge_read_outputs(self, body: Body, fn_name: str) -> None:
        """Output indices read past a node's declared outputs widen it: they cost too."""
        nodes = body.nodes
        widest: dict[int, int] = {}
        signatures, dtypes = nodes.signatures, nodes.signature_table.values
        producers, indices = nodes.input_producers, nodes.input_indices
        widths = list(map(nodes.signature_table.each(len).__getitem__, signatures))
        # Most bodies read no output past its node's declared ones, and every input inside
        # the body: found without a step per edge.
        if (producers and min(producers) < 0) or any(
            map(operator.ge, indices, map(widths.__getitem__, producers))
        ):
            for producer, index in zip(producers, indices):
                if producer >= 0 and index >= widths[producer]:
                    widest[producer] = max(widest.get(producer, 0), index)
        for ref in body.rets:
            n = nodes.ids.get(ref.node)
            if n is not None and ref.index >= len(dtypes[signatures[n]]):
                widest[n] = max(widest.get(n, 0), ref.index)
        for n, index in sorted(widest.items()):
            declared = len(dtypes[signatures[n]])
            with self._refusing(nodes.names[n], fn_name):
                self._budget.spend(
                    index + 1 - declared,
                    f"has its output {index} read but declares {declared} outputs",
                )

    def _node_kind(
        self, node_def: Any, fn_name: str
    ) -> tuple[str, str, list[str], NodeKind, Numbers | None]:
        """A node's name, op type, inputs and kind, and the kind's numbers if it was met
        before (None: its cost is taken as it is read). Most nodes are of a kind met before:
        split on the wire and looked up by their bytes, without a parse."""
        split = split_node_def(node_def) if isinstance(node_def, bytes) else None
        cut = None
        if split is not None:
            name, op, texts, rest = split
            known = self._kinds_by_bytes.get((op, rest))
            if known is not None:
                return name, op, texts, known[0], known[1]
            if self._kinds.may_call(op):
                cut = cut_callees(rest)
                caller = self._kinds_by_callees.get((op, cut[0])) if cut else None
                if cut and caller is not None:
                    kind = self._kinds.calling(caller, cut[1])
                    return name, op, texts, kind, self._numbers(op, kind)
        return self._read_node(node_def, fn_name, split, cut)

    def _read_node(
        self,
        node_def: Any,
        fn_name: str,
        split: tuple[str, str, list[str], bytes] | None,
        cut: tuple[tuple[bytes, ...], tuple[tuple[str, str], ...]] | None = None,
    ) -> tuple[str, str, list[str], NodeKind, None]:
        """A function's node of a kind not met before (or whose bytes the split does not
        read: `split` is None): its name, op type, inputs and kind, whose cost is taken from
        the budget as it is read. Its kind is kept by the bytes of its fields after the name
        and inputs, for the nodes of the kind that follow; a node that calls functions
        (`cut`: its bytes around their names) also by those bytes."""
        parsed = parse_node_def(node_def, fn_name, self._what)
        name = parsed.name
        try:
            kind = self._kinds.of(parsed, self._budget)
        except Refused as refused:
            raise malformed(self._what, _where("node", name, fn_name), refused) from None
        texts = list(parsed.input)
        if (
            split is not None
            and len(split[3]) <= _KIND_BYTES
            and split[:3]
            == (
                name,
                parsed.op,
                texts,
            )
        ):
            # Kept from its second node on: a kind met once (a call names its callee in its
            # bytes) would keep its parse alive for nothing.
            key = (parsed.op, split[3])
            digest = hash(key)
            if digest in self._kinds_met:
                self._kinds_by_bytes[key] = (kind, self._numbers(parsed.op, kind))
            else:
                self._kinds_met.add(digest)
            # The kind's calls are the names cut out, each alone: its neighbours but for
            # their callees are it, calling theirs.
            if cut is not None and kind.calls == {key: (callee,) for key, callee in cut[1]}:
                self._kinds_by_callees[(parsed.op, cut[0])] = kind
        return name, parsed.op, texts, kind, None

    def _numbers(self, op: str, kind: NodeKind) -> Numbers:
        """The numbers of op type `op` and of `kind`'s signature, calls and attributes."""
        return self._tables.number(op, kind.output_dtypes, kind.calls, kind.attrs)

    def _node(
        self,
        nodes: FlatNodes,
        name: str,
        op: str,
        kind: NodeKind,
        producers: list[int],
        indices: list[int],
        later: list[tuple[int, str]],
        fn_name: str,
        branch: int | None,
        numbers: Numbers | None = None,
    ) -> None:
        """Add the node `name` of kind `kind`, whose inputs read output `indices[k]` of node
        number `producers[k]` (or of a node not added yet: `later`, as in
        `FlatNodes.append_numbered`), to `nodes` of function `fn_name` (`branch`: which of a
        tf.cond's branches it is, if one). `numbers`: the kind's numbers in the tables, for a
        kind met before, whose cost is taken here (None: it was taken as the kind was
        read)."""
        if name in nodes.ids:
            raise Refused("is the name of two nodes")  # TensorFlow refuses it too
        if numbers is None:
            numbers = self._numbers(op, kind)
        elif kind.spends:
            for items, fact in kind.spends:
                self._budget.spend(items, fact)
        inputs = len(producers)
        if inputs > 1 and len(kind.output_dtypes) > 1:
            outputs = len(kind.output_dtypes)
            self._budget.spend(inputs * outputs, f"has {inputs} inputs and {outputs} outputs")
        location = self._locations and self._locations(name, fn_name)
        # Op types, output signatures, calls and attributes are numbered in tables of the
        # distinct ones: a node holds their numbers.
        nodes.append_numbered(
            name,
            numbers,
            producers,
            indices,
            later,
            kind.gradient_op_type,
            location and self._op_lines(location, op, branch),
            self._shapes(name, fn_name) if self._shapes else (),
        )

    def _callees(self, body: Body) -> Iterable[str]:
        nodes = body.nodes
        table = nodes.calls_table.values
        for number in nodes.calls:  # in node order, as the bodies are then converted
            if not number:
                continue  # number 0: no calls
            for names in table[number].values():
                yield from (n for n in names if n in self._functions)


def _where(kind: str, name: str, fn_name: str) -> str:
    return (
        f"{kind} {name!r} in function {fn_name!r}" if fn_name else f"{kind} {name!r} of the graph"
    )


_KIND_BYTES = 512
"""Kinds are kept by their bytes up to this size: a node with a large constant is its own."""


_NO_OUTPUT_ARGUMENTS: dict[str, int] = {}
"""The layout of an argument: it has one output, not named by an output argument."""

_SHARED_NAMES = 4096
"""Functions of at most this many nodes share the strings of their nodes' names."""

_UNRESOLVED = TensorRef("", 0)
"""A function input set once its producer's output layout is known."""


def _first_repeated(names: list[str]) -> str:
    """The first of `names` met a second time (there is one)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    raise ValueError("no name is repeated")
