"""Mark which inputs of each node come from a Const node, through Identity ops."""

from __future__ import annotations

from gradcheck_cli.graph.model import Body


def mark_constant_inputs(body: Body) -> None:
    """Set the constant-input flag of every input edge of `body` (flat nodes).

    Each tensor is followed through its Identity ops once, however many read it or how long
    the chain (a chain of a million Identity ops is linear, not quadratic).
    """
    nodes = body.nodes
    op_types, starts, producers = nodes.op_types, nodes.input_start, nodes.input_producers
    identity, const = nodes.op_table.find("Identity"), nodes.op_table.find("Const")
    if const < 0 or const not in op_types:
        return  # no Const node: no input is constant (most small functions)
    # Per node: 1 if it is a Const, or an Identity of one; 2 if not; 0 while unknown.
    constant = bytearray(len(nodes))

    def is_constant(n: int) -> bool:
        chain: list[int] = []
        on_chain: set[int] = set()
        while not constant[n]:
            op = op_types[n]
            if op != identity or starts[n] == starts[n + 1]:
                constant[n] = 1 if op == const else 2
                break
            if n in on_chain:  # a cycle of Identity ops holds no constant
                constant[n] = 2
                break
            chain.append(n)
            on_chain.add(n)
            n = producers[starts[n]]
            if n < 0:  # an input from outside the body
                constant[chain[-1]] = 2
                n = chain[-1]
                break
        found = constant[n]
        for link in chain:
            constant[link] = found
        return found == 1

    flags = nodes.constant_inputs
    for edge, producer in enumerate(producers):
        if producer >= 0 and (
            constant[producer] == 1 or not constant[producer] and is_constant(producer)
        ):
            flags[edge] = 1
