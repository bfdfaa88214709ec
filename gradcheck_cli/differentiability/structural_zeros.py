"""Edges whose gradient exists but is zero by construction: a product with a constant zero, a
select on a constant condition. Only constants literally in the graph count."""

from __future__ import annotations

from collections.abc import Mapping

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import CONSTANT_ATTR, Constant, Node, TensorRef

_PRODUCTS = frozenset({"Mul", "MulNoNan"})
_SELECTS = frozenset({"Select", "SelectV2"})
# Ops whose output is their first input's value.
_PASS_THROUGH = frozenset({"Identity", "Snapshot"})
# How far through identities a constant is followed: graphs chain a few, never many.
_MAX_HOPS = 8


def zero_cut(
    node: Node, input_index: int, producers: Mapping[str, Node]
) -> tuple[Reason, str] | None:
    """Why the gradient from `node`'s outputs into input `input_index` is always zero, or None."""
    if node.op_type in _PRODUCTS and len(node.inputs) == 2 and input_index in (0, 1):
        other = node.inputs[1 - input_index]
        if is_zero(other, producers):
            return Reason.ZERO_GRADIENT, (
                "it is multiplied by a constant zero, so its gradient is zero everywhere"
            )
    if node.op_type in _SELECTS and len(node.inputs) == 3 and input_index in (1, 2):
        condition = constant_of(node.inputs[0], producers)
        # tf.where(c, x, y) sends the gradient to x where c holds and to y elsewhere.
        never_taken = False if input_index == 1 else True
        if condition is not None and condition.all_equal(never_taken):
            branch = "x" if input_index == 1 else "y"
            value = str(never_taken).lower()
            return Reason.ZERO_GRADIENT, (
                f"the condition of this tf.where is a constant, {value} everywhere, so its "
                f"{branch} input is never selected and gets a zero gradient"
            )
    return None


def constant_of(ref: TensorRef, producers: Mapping[str, Node]) -> Constant | None:
    """The value of `ref` when a Const node in the graph fixes it, looking through identities."""
    node = _through_identities(ref, producers)
    if node is None or ref.index != 0:
        return None
    value = node.attrs.get(CONSTANT_ATTR)
    return value if isinstance(value, Constant) else None


def is_zero(ref: TensorRef, producers: Mapping[str, Node]) -> bool:
    """True if `ref` is all zeros whatever the inputs: a zero Const, zeros_like, a zero fill."""
    node = _through_identities(ref, producers)
    if node is None or ref.index != 0:
        return False
    if node.op_type == "ZerosLike":
        return True
    if node.op_type == "Fill" and len(node.inputs) == 2:
        return is_zero(node.inputs[1], producers)
    value = node.attrs.get(CONSTANT_ATTR)
    return isinstance(value, Constant) and value.all_equal(0)


def _through_identities(ref: TensorRef, producers: Mapping[str, Node]) -> Node | None:
    node = producers.get(ref.node)
    for _ in range(_MAX_HOPS):
        if node is None or node.op_type not in _PASS_THROUGH or not node.inputs:
            return node
        ref = node.inputs[0]
        node = producers.get(ref.node)
    return None
