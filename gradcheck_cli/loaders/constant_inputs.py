"""Mark which inputs of each node come from a Const node, through Identity ops."""

from __future__ import annotations

from gradcheck_cli.graph.model import Body, TensorRef


def mark_constant_inputs(body: Body) -> None:
    """Set `constant_inputs` on every node of `body`."""
    kinds = {name: (node.op_type, node.inputs[:1]) for name, node in body.nodes.items()}
    for node in body.nodes.values():
        node.constant_inputs = tuple(_is_constant(kinds, ref.node) for ref in node.inputs)


def _is_constant(kinds: dict[str, tuple[str, tuple[TensorRef, ...]]], name: str) -> bool:
    for _ in range(len(kinds)):
        op_type, first = kinds.get(name, ("", ()))
        if op_type != "Identity" or not first:
            return op_type == "Const"
        name = first[0].node
    return False
