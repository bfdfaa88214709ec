"""What a node's op type and attributes say, apart from its name and inputs: its outputs, the
functions it calls, the few attributes the cut rules read, its gradient override.

A large graph repeats a few hundred kinds of node: the builder asks `NodeKinds.of` once per
distinct op type and serialized attributes, and shares the `NodeKind` between the nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from gradcheck_cli.graph.model import CONSTANT_ATTR
from gradcheck_cli.protos.constant_values import constant_value
from gradcheck_cli.protos.limits import ExpansionBudget, Refused
from gradcheck_cli.protos.missed_overrides import (
    MISSED_OVERRIDE,
    MISSED_OVERRIDE_ATTR,
    missed_override,
)
from gradcheck_cli.protos.tf_protos import dtype_name

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


class _Spends:
    """Takes items from a budget and keeps what it took."""

    def __init__(self, budget: ExpansionBudget) -> None:
        self._budget = budget
        self.taken: list[tuple[int, str]] = []

    def take(self, spend: tuple[int, str]) -> None:
        self._budget.spend(*spend)
        self.taken.append(spend)


@dataclass(frozen=True)
class NodeKind:
    """What one kind of node is (never changed once built: nodes share it)."""

    layout: Layout
    # Output argument name -> the flat index of its first output.
    offsets: dict[str, int]
    output_dtypes: tuple[str | None, ...]
    calls: dict[str, tuple[str, ...]]
    attrs: dict[str, object]
    gradient_op_type: str | None
    # What each node of the kind costs the expansion budget: (items, the fact that asks).
    spends: tuple[tuple[int, str], ...]


class NodeKinds:
    """Reads node kinds off NodeDefs, with the OpDefs and the library's functions."""

    def __init__(
        self, functions: Mapping[str, Any], op_defs: Mapping[str, Any], notes: list[str]
    ) -> None:
        """`notes`: where to tell what the kinds cannot model (an op type without an OpDef)."""
        self._functions = functions
        self._op_defs = op_defs
        self.notes = notes
        self._unknown_ops: set[str] = set()
        # Op type -> the attributes its OpDef types as functions (None: no OpDef, read all).
        self._func_attr_names: dict[str, frozenset[str] | None] = {}
        # Output offsets by their layout, kept once.
        self._shared_offsets: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
        # Op type -> its OpDef's output arguments, read from the proto once.
        self._output_args: dict[str, tuple[_OutputArg, ...]] = {}

    def of(self, node_def: Any, budget: ExpansionBudget) -> NodeKind:
        """The kind of `node_def`; what it costs is taken from `budget` as it is read (before
        a crafted count is allocated), and kept in the kind for the next nodes of the kind."""
        spends = _Spends(budget)
        layout = self._output_layout(node_def, spends)
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
        return NodeKind(
            layout,
            self._offsets(layout),
            output_dtypes,
            calls,
            attrs,
            grad_type,
            tuple(spends.taken),
        )

    def _offsets(self, layout: Layout) -> dict[str, int]:
        """Output argument name -> the flat index of its first output; one dict for all the
        nodes of one output signature (never changed once built)."""
        signature = tuple((name, len(dtypes)) for name, dtypes in layout)
        if signature not in self._shared_offsets:
            self._shared_offsets[signature] = _offsets(layout)
        return self._shared_offsets[signature]

    def may_call(self, op: str) -> bool:
        """Whether a node of op type `op` may name functions in its attributes (its OpDef
        types one `func` or `list(func)`, or it has no OpDef)."""
        return self._function_attr_names(op) != frozenset()

    def calling(self, kind: NodeKind, names: Iterable[tuple[str, str]]) -> NodeKind:
        """`kind` for a node that calls, by attribute, the functions `names` instead."""
        calls = {key: (name,) for key, name in names}
        return NodeKind(
            kind.layout,
            kind.offsets,
            kind.output_dtypes,
            calls,
            kind.attrs,
            kind.gradient_op_type,
            kind.spends,
        )

    def _function_attr_names(self, op: str) -> frozenset[str] | None:
        if op not in self._func_attr_names:
            op_def = self._op_defs.get(op)
            self._func_attr_names[op] = (
                frozenset(a.name for a in op_def.attr if a.type in ("func", "list(func)"))
                if op_def is not None
                else None
            )
        return self._func_attr_names[op]

    def _function_attrs(self, op: str, present: list[str]) -> Iterable[str]:
        """The attributes of a node that may name functions: those its OpDef types `func` or
        `list(func)`; every attribute of an op without one (a call by function name)."""
        names = self._function_attr_names(op)
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

    def _output_layout(self, node_def: Any, spends: _Spends) -> Layout:
        """[(output arg name, dtypes of its flat outputs)] from the OpDef or the callee."""
        fdef = self._functions.get(node_def.op)
        if fdef is not None:
            outputs = fdef.signature.output_arg
            spends.take(
                (len(outputs), f"declares {len(outputs)} outputs (its function returns them)")
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
                spends.take(
                    (len(types), f"declares {len(types)} outputs ({out.type_list_attr} lists them)")
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
                    spends.take((count, f"declares {count} outputs ({out.number_attr}={count})"))
                dtypes = [single] * count
            layout.append((out.name, dtypes))
        return layout


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
