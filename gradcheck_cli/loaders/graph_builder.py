"""Turn TensorFlow FunctionDef and GraphDef protos into the graph model."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import ARG_OP, Body, Node, SourceLocation, TensorRef
from gradcheck_cli.loaders.tf_protos import dtype_name

LocationLookup = Callable[[str, str], "SourceLocation | None"]
"""(node name, function name or "" for a top-level graph) -> where the user's code made it."""

_KEPT_ATTRS = ("DstT", "SrcT", "is_training", "T")


def _no_location(node: str, function: str) -> SourceLocation | None:
    return None


class GraphBuilder:
    """Converts the functions reachable from a top function or graph, each once."""

    def __init__(
        self,
        functions: Mapping[str, Any],
        op_defs: Mapping[str, Any],
        locations: LocationLookup = _no_location,
    ) -> None:
        self._functions = functions
        self._op_defs = op_defs
        self._locations = locations
        self.bodies: dict[str, Body] = {}
        self.notes: list[str] = []
        self._unknown_ops: set[str] = set()

    # -- entry points -----------------------------------------------------------------------

    def add_function(self, name: str) -> Body:
        """Convert function `name` and every function it calls, transitively."""
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
            pending.extend(self._callees(body))
        if name not in self.bodies:
            raise GradcheckError(f"the model is malformed: function {name} has no body")
        return self.bodies[name]

    def add_graph(self, graph_def: Any, name: str, loss: TensorRef) -> Body:
        """Convert a TF1 GraphDef into a body whose single ret is the loss."""
        nodes: dict[str, Node] = {}
        for node_def in graph_def.node:
            inputs = tuple(_graph_ref(text) for text in node_def.input if not text.startswith("^"))
            nodes[node_def.name] = self._node(node_def, inputs, "")
        body = Body(name=name, nodes=nodes, args=(), rets=(loss,))
        self.bodies[name] = body
        for callee in self._callees(body):
            self.add_function(callee)
        return body

    # -- conversion -------------------------------------------------------------------------

    def _function_body(self, fdef: Any) -> Body:
        fn_name = fdef.signature.name
        nodes: dict[str, Node] = {}
        for arg in fdef.signature.input_arg:
            nodes[arg.name] = Node(
                name=arg.name,
                op_type=ARG_OP,
                output_dtypes=(dtype_name(arg.type) if arg.type else None,),
            )
        # FunctionDef refs name an output *argument* ("MatMul:product:0"); resolve them to
        # flat output indices once every node's output layout is known.
        layouts = {n.name: self._output_layout(n) for n in fdef.node_def}
        for node_def in fdef.node_def:
            inputs = tuple(
                _function_ref(text, layouts) for text in node_def.input if not text.startswith("^")
            )
            nodes[node_def.name] = self._node(node_def, inputs, fn_name, layouts[node_def.name])
        rets = tuple(
            _function_ref(fdef.ret[out.name], layouts) for out in fdef.signature.output_arg
        )
        args = tuple(arg.name for arg in fdef.signature.input_arg)
        return Body(name=fn_name, nodes=nodes, args=args, rets=rets)

    def _node(
        self,
        node_def: Any,
        inputs: tuple[TensorRef, ...],
        fn_name: str,
        layout: list[tuple[str, list[str | None]]] | None = None,
    ) -> Node:
        if layout is None:
            layout = self._output_layout(node_def)
        calls: dict[str, tuple[str, ...]] = {}
        for key, value in node_def.attr.items():
            if value.HasField("func"):
                calls[key] = (value.func.name,)
            elif value.HasField("list") and value.list.func:
                calls[key] = tuple(f.name for f in value.list.func)
        if node_def.op in self._functions:
            calls["f"] = (node_def.op,)
        attrs: dict[str, object] = {}
        for key in _KEPT_ATTRS:
            if key in node_def.attr:
                value = node_def.attr[key]
                attrs[key] = dtype_name(value.type) if value.HasField("type") else value.b
        grad_type = None
        if "_gradient_op_type" in node_def.attr:
            grad_type = node_def.attr["_gradient_op_type"].s.decode() or None
        return Node(
            name=node_def.name,
            op_type=node_def.op,
            inputs=inputs,
            output_dtypes=tuple(d for _, dtypes in layout for d in dtypes),
            calls=calls,
            gradient_op_type=grad_type,
            attrs=attrs,
            location=self._locations(node_def.name, fn_name),
        )

    def _output_layout(self, node_def: Any) -> list[tuple[str, list[str | None]]]:
        """[(output arg name, dtypes of its flat outputs)] from the OpDef or the callee."""
        fdef = self._functions.get(node_def.op)
        if fdef is not None:
            return [
                (out.name, [dtype_name(out.type) if out.type else None])
                for out in fdef.signature.output_arg
            ]
        op_def = self._op_defs.get(node_def.op)
        if op_def is None:
            if node_def.op not in self._unknown_ops:
                self._unknown_ops.add(node_def.op)
                self.notes.append(
                    f"op type {node_def.op} is unknown to this TensorFlow; its outputs are "
                    "assumed to carry gradient"
                )
            return []
        layout = []
        for out in op_def.output_arg:
            dtypes: list[str | None]
            if out.type_list_attr:
                listed = _attr(node_def, op_def, out.type_list_attr)
                dtypes = [dtype_name(t) for t in listed.list.type] if listed else []
            else:
                if out.type:
                    single: str | None = dtype_name(out.type)
                else:
                    type_attr = _attr(node_def, op_def, out.type_attr)
                    single = dtype_name(type_attr.type) if type_attr else None
                if single is not None and out.is_ref:
                    single += "_ref"
                count = 1
                if out.number_attr:
                    number = _attr(node_def, op_def, out.number_attr)
                    count = number.i if number else 1
                dtypes = [single] * count
            layout.append((out.name, dtypes))
        return layout

    def _callees(self, body: Body) -> Iterable[str]:
        for node in body.nodes.values():
            for names in node.calls.values():
                yield from (n for n in names if n in self._functions)


def _attr(node_def: Any, op_def: Any, name: str) -> Any:
    if name in node_def.attr:
        return node_def.attr[name]
    for attr_def in op_def.attr:
        if attr_def.name == name and attr_def.HasField("default_value"):
            return attr_def.default_value
    return None


def _graph_ref(text: str) -> TensorRef:
    name, _, index = text.partition(":")
    if not name or (index and not index.isdigit()):
        raise GradcheckError(f"the model is malformed: a node input reads {text!r}")
    return TensorRef(name, int(index) if index else 0)


def _function_ref(
    text: str, layouts: Mapping[str, list[tuple[str, list[str | None]]]]
) -> TensorRef:
    parts = text.split(":")
    if not parts[0] or len(parts) > 3 or not parts[-1].isdigit() and len(parts) > 1:
        raise GradcheckError(f"the model is malformed: a function input reads {text!r}")
    if len(parts) == 1:
        return TensorRef(parts[0], 0)  # a function argument
    node = parts[0]
    if len(parts) == 2:
        return TensorRef(node, int(parts[1]))
    out_arg, index = parts[1], int(parts[2])
    offset = 0
    for name, dtypes in layouts.get(node, []):
        if name == out_arg:
            return TensorRef(node, offset + index)
        offset += len(dtypes)
    return TensorRef(node, index)
