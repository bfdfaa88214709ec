"""Give back the edges TensorFlow folds away when it computes a static shape while tracing."""

from __future__ import annotations

import re
from dataclasses import replace

from gradcheck_cli.graph.model import CONSTANT_ATTR, Body, Node, Program, TensorRef

# `tf.shape(v)`, `tf.size(v)`, `tf.rank(v)` (and `zeros_like`, `ones_like`) read their input
# inside their own name scope, then, when its shape is static, return a Const named after the
# scope instead of the op: the read is left without a consumer and the Const without an input.
_FOLDED = {
    "Shape": "Shape",
    "Size": "Size",
    "Rank": "Rank",
    "zeros_like": "ZerosLike",
    "ones_like": "OnesLike",
}
_SCOPE = re.compile(r"(?:.*/)?(?P<op>" + "|".join(_FOLDED) + r")(?:_\d+)?")


def unfold_shape_reads(program: Program) -> Program:
    """`program` with each folded shape Const turned back into the shape op that reads its input."""
    bodies = {name: _unfold(body) for name, body in program.bodies.items()}
    if all(bodies[name] is body for name, body in program.bodies.items()):
        return program
    return replace(program, bodies=bodies)


def _unfold(body: Body) -> Body:
    flat = body.nodes
    # A folded shape is a Const named after the scope of the op it stands for: a body
    # without one has none (most bodies; found without a step per node).
    if not any(_SCOPE.fullmatch(flat.names[n]) for n in flat.numbers_of_types(("Const",))):
        return body
    unconsumed = set(range(len(flat))).difference(flat.input_producers)
    unconsumed.difference_update(flat.ids[ref.node] for ref in body.rets if ref.node in flat.ids)
    dtypes, signatures = flat.signature_table.values, flat.signatures
    unfolded: dict[str, Node] = {}
    for n in sorted(unconsumed):
        if not dtypes[signatures[n]]:
            continue
        scope = _folding_scope(body, flat.names[n])
        if scope is None:
            continue
        folded = body.nodes[scope]
        match = _SCOPE.fullmatch(scope)
        assert match is not None
        if scope in unfolded:
            continue  # one read per folded op: a second dangling node is something else
        attrs = {k: v for k, v in folded.attrs.items() if k != CONSTANT_ATTR}
        unfolded[scope] = replace(
            folded,
            op_type=_FOLDED[match.group("op")],
            inputs=(TensorRef(flat.names[n], 0),),
            attrs=attrs,
        )
    if not unfolded:
        return body
    return replace(body, nodes={**body.nodes, **unfolded})


def _folding_scope(body: Body, name: str) -> str | None:
    """The nearest enclosing name scope of `name` that is a folded shape Const, if any."""
    flat = body.nodes
    scope, _, _ = name.rpartition("/")
    while scope:
        n = flat.ids.get(scope)
        if n is not None:
            inputs = flat.input_start[n + 1] - flat.input_start[n]
            if _SCOPE.fullmatch(scope) and flat.op_type(n) == "Const" and not inputs:
                return scope
            return None
        scope, _, _ = scope.rpartition("/")
    return None
