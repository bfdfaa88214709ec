"""Turn TensorFlow FunctionDef and GraphDef protos into the graph model."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.flat_nodes import FlatNodes, Tables
from gradcheck_cli.graph.memory import without_cyclic_gc
from gradcheck_cli.graph.model import (
    ARG_OP,
    CONSTANT_ATTR,
    Body,
    SourceLocation,
    TensorRef,
)
from gradcheck_cli.graph.progress import NODES_PER_REPORT, BuiltCount, Progress, silent
from gradcheck_cli.protos.constant_inputs import mark_constant_inputs
from gradcheck_cli.protos.constant_values import constant_value
from gradcheck_cli.protos.limits import ExpansionBudget, Refused, malformed
from gradcheck_cli.protos.missed_overrides import (
    MISSED_OVERRIDE,
    MISSED_OVERRIDE_ATTR,
    missed_override,
)
from gradcheck_cli.protos.tf_protos import dtype_name, node_defs
from gradcheck_cli.source_code.op_expressions import OpLines, branch_of

LocationLookup = Callable[[str, str], "SourceLocation | None"]
ShapeLookup = Callable[[str, str], "tuple[tuple[int | None, ...] | None, ...]"]
"""(node name, function name or "" for a top-level graph) -> where the user's code made it."""

Layout = list[tuple[str, list[str | None]]]
"""[(output argument name, dtypes of its flat outputs)] of one node."""

_KEPT_ATTRS = frozenset({"DstT", "SrcT", "is_training", "T"})
# Attributes that fix which elements a stack or slice moves (read with the constants).
_INDEX_OPS = frozenset({"Pack", "StridedSlice", "GatherV2"})
_INDEX_ATTRS = (
    "axis",
    "batch_dims",
    "begin_mask",
    "end_mask",
    "ellipsis_mask",
    "new_axis_mask",
    "shrink_axis_mask",
)


class _OutputArg(NamedTuple):
    """The fields of an OpDef output argument that shape a node's outputs."""

    name: str
    type_list_attr: str
    type: int
    type_attr: str
    is_ref: bool
    number_attr: str


def _no_location(node: str, function: str) -> SourceLocation | None:
    return None


def _no_shapes(node: str, function: str) -> tuple[tuple[int | None, ...] | None, ...]:
    return ()


class GraphBuilder:
    """Converts the functions reachable from a top function or graph, each once.

    Everything a node expands from its attributes (outputs from `num`, `N`, type lists, a
    callee's signature, output indices its consumers read) is drawn from `budget`; without
    one, the budget is proportional to the functions' serialized size. `what` names the input
    in refusals ("malformed SavedModel: ..."); `progress` hears how much is built, as it goes.
    """

    def __init__(
        self,
        functions: Mapping[str, Any],
        op_defs: Mapping[str, Any],
        locations: LocationLookup = _no_location,
        *,
        shapes: ShapeLookup = _no_shapes,
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
        self._unknown_ops: set[str] = set()
        # Op type -> the attributes its OpDef types as functions (None: no OpDef, read all).
        self._func_attr_names: dict[str, frozenset[str] | None] = {}
        # The tables of op types, signatures, calls and attributes every body numbers into.
        self._tables = Tables()
        # Output offsets by their layout, kept once (never changed once built).
        self._shared_offsets: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
        # Op type -> its OpDef's output arguments, read from the proto once.
        self._output_args: dict[str, tuple[_OutputArg, ...]] = {}

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
        for count, node_def in enumerate(graph_def.node, 1):
            if not count % NODES_PER_REPORT:
                self._built.tell(under_way=count)
            inputs = [_graph_ref(text) for text in node_def.input if not text.startswith("^")]
            with self._refusing(node_def.name, ""):
                self._node(nodes, node_def, sys.intern(node_def.name), inputs, "")
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
        for arg in fdef.signature.input_arg:
            with self._refusing(arg.name, fn_name, "argument"):
                dtype = dtype_name(arg.type) if arg.type else None
                _new_name(nodes, arg.name)
            nodes.append(sys.intern(arg.name), ARG_OP, output_dtypes=(dtype,))
        # FunctionDef refs name an output *argument* ("MatMul:product:0"); they resolve to flat
        # output indices once the producer's output layout is known. One pass: each node is
        # parsed, converted and let go (a function may hold a million of them).
        offsets: dict[str, dict[str, int]] = {}
        waiting: list[tuple[int, list[str]]] = []  # (first edge, inputs) read before producers
        name = ""
        try:
            for count, node_def in enumerate(node_defs(fdef, self._what), 1):
                if not count % NODES_PER_REPORT:
                    self._built.tell(under_way=count)
                # One string per name: the node's, its keys and every reference to it.
                name = sys.intern(node_def.name)
                layout = self._output_layout(node_def)
                offsets[name] = self._offsets(layout)
                texts = [text for text in node_def.input if not text.startswith("^")]
                inputs = [_function_input(text, offsets) for text in texts]
                if None in inputs:
                    waiting.append((nodes.input_start[-1], texts))
                    inputs = [_UNRESOLVED] * len(texts)
                self._node(nodes, node_def, name, inputs, fn_name, layout)
        except Refused as refused:
            raise malformed(self._what, _where("node", name, fn_name), refused) from None
        for first, texts in waiting:
            for edge, text in enumerate(texts, first):
                nodes.set_input(edge, _function_ref(text, offsets))
        rets = tuple(
            _function_ref(fdef.ret[out.name], offsets) for out in fdef.signature.output_arg
        )
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
        assert isinstance(nodes, FlatNodes)
        widest: dict[int, int] = {}
        signatures, dtypes = nodes.signatures, nodes.signature_table.values
        for producer, index in zip(nodes.input_producers, nodes.input_indices):
            if producer >= 0 and index >= len(dtypes[signatures[producer]]):
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

    def _node(
        self,
        nodes: FlatNodes,
        node_def: Any,
        name: str,
        inputs: list[TensorRef],
        fn_name: str,
        layout: Layout | None = None,
    ) -> None:
        """Add the node `name` of `node_def`, reading `inputs`, to `nodes`."""
        _new_name(nodes, name)
        if layout is None:
            layout = self._output_layout(node_def)
        op = node_def.op
        node_attrs = node_def.attr
        present = list(node_attrs)  # each lookup in the proto's map costs; the names, once
        calls: dict[str, tuple[str, ...]] = {}
        for key in self._function_attrs(op, present):
            value = node_attrs[key]
            if value.HasField("func"):
                calls[key] = (value.func.name,)
            elif value.HasField("list") and value.list.func:
                calls[key] = tuple(f.name for f in value.list.func)
        if op in self._functions:
            calls["f"] = (op,)
        attrs: dict[str, object] = {}
        for key in present:
            if key in _KEPT_ATTRS:
                value = node_attrs[key]
                attrs[key] = dtype_name(value.type) if value.HasField("type") else value.b
        if op in _INDEX_OPS:
            attrs.update(self._index_attrs(node_def))
        if MISSED_OVERRIDE_ATTR in present:
            missed = missed_override(node_attrs[MISSED_OVERRIDE_ATTR].s)
            if missed is not None:
                attrs[MISSED_OVERRIDE] = missed
        if op == "Const" and "value" in present:
            constant = constant_value(node_attrs["value"].tensor)
            if constant is not None:
                attrs[CONSTANT_ATTR] = constant
        grad_type = None
        if "_gradient_op_type" in present:
            raw = node_attrs["_gradient_op_type"].s
            try:
                grad_type = raw.decode() or None
            except UnicodeDecodeError:
                raise Refused("has a _gradient_op_type that is not UTF-8 text") from None
        output_dtypes = tuple(d for _, dtypes in layout for d in dtypes)
        outputs = len(output_dtypes)
        if len(inputs) > 1 and outputs > 1:
            self._budget.spend(
                len(inputs) * outputs, f"has {len(inputs)} inputs and {outputs} outputs"
            )
        location = self._locations(name, fn_name)
        # Op types, output signatures, calls and attributes are numbered in tables of the
        # distinct ones: a node holds their numbers.
        nodes.append(
            name,
            op,
            inputs,
            output_dtypes,
            calls,
            grad_type,
            attrs,
            location and self._op_lines(location, op, branch_of(fn_name)),
            self._shapes(name, fn_name),
        )

    def _offsets(self, layout: Layout) -> dict[str, int]:
        """Output argument name -> the flat index of its first output; one dict for all the
        nodes of one output signature (never changed once built)."""
        signature = tuple((name, len(dtypes)) for name, dtypes in layout)
        if signature not in self._shared_offsets:
            self._shared_offsets[signature] = _offsets(layout)
        return self._shared_offsets[signature]

    def _function_attrs(self, op: str, present: list[str]) -> Iterable[str]:
        """The attributes of a node that may name functions: those its OpDef types `func` or
        `list(func)`; every attribute of an op without one (a call by function name)."""
        if op not in self._func_attr_names:
            op_def = self._op_defs.get(op)
            self._func_attr_names[op] = (
                frozenset(a.name for a in op_def.attr if a.type in ("func", "list(func)"))
                if op_def is not None
                else None
            )
        names = self._func_attr_names[op]
        if names is None:
            return present
        return [name for name in present if name in names] if names else ()

    def _index_attrs(self, node_def: Any) -> dict[str, int]:
        """The integer attributes of a stack or slice, defaults included: a SavedModel strips
        the attributes that hold their default value."""
        found: dict[str, int] = {}
        op_def = self._op_defs.get(node_def.op)
        defaults = {a.name: a.default_value for a in op_def.attr} if op_def is not None else {}
        for key in _INDEX_ATTRS:
            value = node_def.attr[key] if key in node_def.attr else defaults.get(key)
            if value is not None and value.WhichOneof("value") == "i":
                found[key] = int(value.i)
        return found

    def _output_layout(self, node_def: Any) -> Layout:
        """[(output arg name, dtypes of its flat outputs)] from the OpDef or the callee."""
        fdef = self._functions.get(node_def.op)
        if fdef is not None:
            outputs = fdef.signature.output_arg
            self._budget.spend(
                len(outputs), f"declares {len(outputs)} outputs (its function returns them)"
            )
            return [(out.name, [dtype_name(out.type) if out.type else None]) for out in outputs]
        op_def = self._op_defs.get(node_def.op)
        if op_def is None:
            if node_def.op not in self._unknown_ops:
                self._unknown_ops.add(node_def.op)
                self.notes.append(
                    f"op type {node_def.op} is unknown to this TensorFlow; its outputs are "
                    "assumed to carry gradient"
                )
            return []
        if node_def.op not in self._output_args:
            self._output_args[node_def.op] = tuple(
                _OutputArg(o.name, o.type_list_attr, o.type, o.type_attr, o.is_ref, o.number_attr)
                for o in op_def.output_arg
            )
        layout = []
        for out in self._output_args[node_def.op]:
            dtypes: list[str | None]
            if out.type_list_attr:
                listed = _attr(node_def, op_def, out.type_list_attr, "list")
                types = listed.list.type if listed else ()
                self._budget.spend(
                    len(types), f"declares {len(types)} outputs ({out.type_list_attr} lists them)"
                )
                dtypes = [dtype_name(t) for t in types]
            else:
                if out.type:
                    single: str | None = dtype_name(out.type)
                else:
                    type_attr = _attr(node_def, op_def, out.type_attr, "type")
                    single = dtype_name(type_attr.type) if type_attr else None
                if single is not None and out.is_ref:
                    single += "_ref"
                count = 1
                if out.number_attr:
                    number = _attr(node_def, op_def, out.number_attr, "i")
                    count = number.i if number else 1
                    self._budget.spend(
                        count, f"declares {count} outputs ({out.number_attr}={count})"
                    )
                dtypes = [single] * count
            layout.append((out.name, dtypes))
        return layout

    def _callees(self, body: Body) -> Iterable[str]:
        nodes = body.nodes
        assert isinstance(nodes, FlatNodes)
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


def _attr(node_def: Any, op_def: Any, name: str, kind: str) -> Any:
    """The node's attribute `name` (or the OpDef's default) holding a `kind`, or None."""
    value = None
    if name in node_def.attr:
        value = node_def.attr[name]
    else:
        for attr_def in op_def.attr:
            if attr_def.name == name and attr_def.HasField("default_value"):
                value = attr_def.default_value
                break
    if value is None:
        return None
    held = value.WhichOneof("value")
    if held == "placeholder":  # a polymorphic function's attribute: not known here
        return None
    if held != kind:
        raise Refused(f"has attribute {name} holding {held or 'nothing'}, not {_KINDS[kind]}")
    return value


_KINDS = {"i": "an integer", "list": "a list", "type": "a dtype"}


def _offsets(layout: Layout) -> dict[str, int]:
    """Output argument name -> the flat index of its first output."""
    offsets: dict[str, int] = {}
    offset = 0
    for name, dtypes in layout:
        offsets.setdefault(name, offset)
        offset += len(dtypes)
    return offsets


def _function_input(text: str, offsets: Mapping[str, dict[str, int]]) -> tuple[str, int] | None:
    """A function input as (producer, flat output index); None while its producer's outputs
    are not known (an output argument of a node not converted yet)."""
    parts = text.split(":")
    if len(parts) == 3 and parts[0] in offsets and parts[2].isdigit():
        index = int(parts[2])
        if index < _MAX_INDEX:
            return sys.intern(parts[0]), offsets[parts[0]].get(parts[1], 0) + index
    if len(parts) == 3 and parts[0] and parts[0] not in offsets:
        return None
    return _function_ref(text, offsets)


_UNRESOLVED = TensorRef("", 0)
"""A function input set once its producer's output layout is known."""


def _new_name(nodes: FlatNodes, name: str) -> None:
    """Refuse a second node of the same name (TensorFlow refuses it too)."""
    if name in nodes:
        raise Refused("is the name of two nodes")


_MAX_INDEX = 2**62
"""Output indices past this cannot be read by any graph (the expansion budget refuses far
smaller ones once the producer is known); refused as they are parsed."""


def _graph_ref(text: str) -> TensorRef:
    name, _, index = text.partition(":")
    if not name or (index and not index.isdigit()) or index and int(index) >= _MAX_INDEX:
        raise GradcheckError(f"the model is malformed: a node input reads {text!r}")
    return TensorRef(name, int(index) if index else 0)


def _function_ref(text: str, offsets: Mapping[str, dict[str, int]]) -> TensorRef:
    parts = text.split(":")
    if (
        not parts[0]
        or len(parts) > 3
        or len(parts) > 1
        and (not parts[-1].isdigit() or int(parts[-1]) >= _MAX_INDEX)
    ):
        raise GradcheckError(f"the model is malformed: a function input reads {text!r}")
    node = sys.intern(parts[0])
    if len(parts) == 1:
        return TensorRef(node, 0)  # a function argument
    if len(parts) == 2:
        return TensorRef(node, int(parts[1]))
    out_arg, index = parts[1], int(parts[2])
    return TensorRef(node, offsets.get(node, {}).get(out_arg, 0) + index)
