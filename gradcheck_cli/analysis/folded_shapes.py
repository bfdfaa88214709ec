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
    consumed = {ref.node for node in body.nodes.values() for ref in node.inputs}
    consumed.update(ref.node for ref in body.rets)
    unfolded: dict[str, Node] = {}
    for node in body.nodes.values():
        if node.name in consumed or not node.output_dtypes:
            continue
        scope = _folding_scope(body, node.name)
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
            inputs=(TensorRef(node.name, 0),),
            attrs=attrs,
        )
    if not unfolded:
        return body
    return replace(body, nodes={**body.nodes, **unfolded})


def _folding_scope(body: Body, name: str) -> str | None:
    """The nearest enclosing name scope of `name` that is a folded shape Const, if any."""
    scope, _, _ = name.rpartition("/")
    while scope:
        folded = body.nodes.get(scope)
        if folded is not None:
            if _SCOPE.fullmatch(scope) and folded.op_type == "Const" and not folded.inputs:
                return scope
            return None
        scope, _, _ = scope.rpartition("/")
    return None
