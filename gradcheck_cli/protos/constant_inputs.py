"""Mark which inputs of each node come from a Const node, through Identity ops."""

from __future__ import annotations

from gradcheck_cli.graph.model import Body


def mark_constant_inputs(body: Body) -> None:
    """Set `constant_inputs` on every node of `body`.

    Each tensor is followed through its Identity ops once, however many read it or how long
    the chain (a chain of a million Identity ops is linear, not quadratic); the few distinct
    patterns of flags are shared between nodes.
    """
    nodes = body.nodes
    constant: dict[str, bool] = {}

    def is_constant(name: str) -> bool:
        chain: list[str] = []
        on_chain: set[str] = set()
        while name not in constant:
            node = nodes.get(name)
            if node is None or node.op_type != "Identity" or not node.inputs:
                constant[name] = node is not None and node.op_type == "Const"
                break
            if name in on_chain:  # a cycle of Identity ops holds no constant
                constant[name] = False
                break
            chain.append(name)
            on_chain.add(name)
            name = node.inputs[0].node
        found = constant[name]
        for link in chain:
            constant[link] = found
        return found

    patterns: dict[tuple[bool, ...], tuple[bool, ...]] = {}
    for node in nodes.values():
        flags = tuple(is_constant(ref.node) for ref in node.inputs)
        node.constant_inputs = patterns.setdefault(flags, flags)
