"""Edges whose gradient exists but is zero by construction: a product with a constant zero, a
select on a constant condition, a stack whose constant slices never take a piece. Only
constants literally in the graph count."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.flat_nodes import FlatNodes, positions
from gradcheck_cli.graph.model import CONSTANT_ATTR, Constant, Node, TensorRef

PRODUCTS = frozenset({"Mul", "MulNoNan"})
_SELECTS = frozenset({"Select", "SelectV2"})
# Ops whose output is their first input's value.
_PASS_THROUGH = frozenset({"Identity", "Snapshot", "ReadVariableOp"})
ZERO_RULE_OPS = PRODUCTS | _SELECTS | {"Pack", "ConcatV2"}
"""The op types a structural-zero rule looks at; `zero_cut` is None for every other."""
# How far through identities a constant is followed: graphs chain a few, never many.
_MAX_HOPS = 8
# Stacks larger than this are not worth enumerating row by row.
_MAX_ROWS = 4096


@dataclass(frozen=True)
class Surroundings:
    """What a rule may look at around a node: its body's producers and consumers, and the
    static shapes known from outside the graph (the variables')."""

    producers: Mapping[str, Node]
    consumers: Mapping[TensorRef, Sequence[tuple[Node, int]]] = field(default_factory=dict)
    rets: frozenset[TensorRef] = frozenset()
    shapes: Mapping[TensorRef, tuple[int | None, ...]] = field(default_factory=dict)


def zero_cut(node: Node, input_index: int, around: Surroundings) -> tuple[Reason, str] | None:
    """Why the gradient from `node`'s outputs into input `input_index` is always zero, or None."""
    producers = around.producers
    if node.op_type in PRODUCTS and len(node.inputs) == 2 and input_index in (0, 1):
        if is_zero(node.inputs[1 - input_index], producers):
            return Reason.ZERO_GRADIENT, (
                "it is multiplied by a constant zero, so its gradient is zero everywhere"
            )
    if node.op_type in _SELECTS and len(node.inputs) == 3 and input_index in (1, 2):
        condition = constant_of(node.inputs[0], producers)
        # tf.where(c, x, y) sends the gradient to x where c holds and to y elsewhere.
        never_taken = input_index == 2
        if condition is not None and condition.all_equal(never_taken):
            branch = "x" if input_index == 1 else "y"
            return Reason.ZERO_GRADIENT, (
                f"the condition of this tf.where is a constant, {str(never_taken).lower()} "
                f"everywhere, so its {branch} input is never selected and gets a zero gradient"
            )
    rows = _rows_of_piece(node, input_index, around)
    if rows is not None and _only_other_rows_used(node, rows, around):
        what = "stacked" if node.op_type == "Pack" else "concatenated"
        return Reason.ZERO_GRADIENT, (
            f"it is {what} into a tensor that is only read through constant slices or "
            "gathers that leave out all of its elements, so its gradient is zero"
        )
    return None


def zero_rule_may_apply(flat: FlatNodes, n: int) -> bool:
    """Whether `zero_cut` may cut an input of node number `n` of `flat`: False for an op type
    no structural-zero rule looks at, and for a product neither of whose factors can be zero
    by construction (read on the arrays, without making nodes)."""
    op = flat.op_type(n)
    if op not in ZERO_RULE_OPS:
        return False
    return op not in PRODUCTS or a_factor_may_be_zero(flat, n)


def a_factor_may_be_zero(flat: FlatNodes, n: int) -> bool:
    """Whether one factor of product number `n` may be zero by construction (`zero_cut`)."""
    start, stop = flat.input_start[n], flat.input_start[n + 1]
    return stop - start == 2 and (_may_be_zero(flat, start) or _may_be_zero(flat, start + 1))


def products_with_a_zero_factor(flat: FlatNodes, products: bytes) -> set[int]:
    """The products (`products[n]` is 1 for each) of which `a_factor_may_be_zero` holds:
    found forward from the few nodes that may be a zero (a zero constant, a zeros_like, a
    fill), through identities, by C-speed scans of the arrays, without a step per node."""
    ops, op_types = flat.op_table, flat.op_types
    holders = flat.numbers_of_types(("ZerosLike", "Fill"))
    zeros = flat.attrs_table.each(_holds_a_zero_constant)
    const = ops.find("Const")
    for number in {a for a in set(flat.attrs) if zeros[a]} if const >= 0 else ():
        holders += [n for n in positions(flat.attrs, number) if op_types[n] == const]
    starts, indices = flat.input_start, flat.input_indices
    passing_on = {ops.find(op) for op in _PASS_THROUGH}
    # Nodes whose output 0 `_may_be_zero`'s walk would find a zero behind: a holder, or an
    # identity whose first input reads one's output 0, up to the walk's hops.
    found: set[int] = set()
    frontier = holders
    for hop in range(_MAX_HOPS):
        found.update(frontier)
        readers = []
        for n in frontier if hop < _MAX_HOPS - 1 else ():
            for edge in positions(flat.input_producers, n):
                reader = bisect_right(starts, edge) - 1
                if (
                    indices[edge] == 0
                    and edge == starts[reader]
                    and op_types[reader] in passing_on
                    and reader not in found
                ):
                    readers.append(reader)
        frontier = readers
    cut: set[int] = set()
    for n in found:
        for edge in positions(flat.input_producers, n):
            reader = bisect_right(starts, edge) - 1
            if products[reader] and indices[edge] == 0 and starts[reader + 1] - starts[reader] == 2:
                cut.add(reader)
    return cut


def _holds_a_zero_constant(attrs: Mapping[str, object]) -> bool:
    value = attrs.get(CONSTANT_ATTR)
    return isinstance(value, Constant) and value.all_equal(0)


def _may_be_zero(flat: FlatNodes, edge: int) -> bool:
    """False when the tensor input `edge` reads cannot be a structural zero (`is_zero`): it
    comes, through identities, from an op that is neither a zero constant, a zeros_like nor a
    fill (a fill is left to `is_zero`)."""
    producer, index = flat.input_producers[edge], flat.input_indices[edge]
    for _ in range(_MAX_HOPS):
        if index != 0 or producer < 0:
            return False
        op = flat.op_type(producer)
        start = flat.input_start[producer]
        if op not in _PASS_THROUGH or start == flat.input_start[producer + 1]:
            break
        producer, index = flat.input_producers[start], flat.input_indices[start]
    else:
        return False
    if op == "Const":
        return _holds_a_zero_constant(flat.attrs_table.values[flat.attrs[producer]])
    return op in ("ZerosLike", "Fill")


def constant_of(ref: TensorRef, producers: Mapping[str, Node]) -> Constant | None:
    """The value of `ref` when a Const node in the graph fixes it, looking through identities."""
    node = _through_identities(ref, producers)
    if node is None or node.op_type != "Const":
        return None
    value = node.attrs.get(CONSTANT_ATTR)
    return value if isinstance(value, Constant) else None


def is_zero(ref: TensorRef, producers: Mapping[str, Node]) -> bool:
    """True if `ref` is all zeros whatever the inputs: a zero Const, zeros_like, a zero fill."""
    node = _through_identities(ref, producers)
    if node is None:
        return False
    if node.op_type == "ZerosLike":
        return True
    if node.op_type == "Fill" and len(node.inputs) == 2:
        return is_zero(node.inputs[1], producers)
    value = constant_of(ref, producers)
    return value is not None and value.all_equal(0)


def _through_identities(ref: TensorRef, producers: Mapping[str, Node]) -> Node | None:
    for _ in range(_MAX_HOPS):
        node = producers.get(ref.node)
        if ref.index != 0 or node is None:
            return None
        if node.op_type not in _PASS_THROUGH or not node.inputs:
            return node
        ref = node.inputs[0]
    return None


# -- stacks and concatenations read through constant slices --------------------------------


def _rows_of_piece(node: Node, index: int, around: Surroundings) -> tuple[range, int] | None:
    """(rows of axis 0 that input `index` fills, rows in all) for a stack or concatenation."""
    if node.op_type == "Pack" and node.attrs.get("axis") == 0:
        return range(index, index + 1), len(node.inputs)
    if node.op_type != "ConcatV2" or len(node.inputs) < 2 or index >= len(node.inputs) - 1:
        return None
    axis = constant_of(node.inputs[-1], around.producers)
    if axis is None or axis.shape != () or not axis.all_equal(0):
        return None
    sizes = [_leading_dimension(ref, around) for ref in node.inputs[:-1]]
    if any(size is None for size in sizes):
        return None
    known = [int(size) for size in sizes if size is not None]
    start = sum(known[:index])
    return range(start, start + known[index]), sum(known)


def _leading_dimension(ref: TensorRef, around: Surroundings) -> int | None:
    node = _through_identities(ref, around.producers)
    if node is None:
        return None
    if node.op_type == "Const":
        value = node.attrs.get(CONSTANT_ATTR)
        shape = value.shape if isinstance(value, Constant) else None
    else:
        shape = around.shapes.get(TensorRef(node.name, 0))
    return shape[0] if shape and shape[0] is not None else None


def _only_other_rows_used(node: Node, piece: tuple[range, int], around: Surroundings) -> bool:
    rows, total = piece
    output = TensorRef(node.name, 0)
    readers = around.consumers.get(output, ())
    if output in around.rets or not readers or total > _MAX_ROWS or not rows:
        return False
    for reader, position in readers:
        taken = _rows_taken(reader, position, total, around.producers)
        if taken is None or not taken.isdisjoint(rows):
            return False
    return True


def _rows_taken(
    reader: Node, position: int, total: int, producers: Mapping[str, Node]
) -> set[int] | None:
    """The rows of axis 0 that `reader` takes from its input `position`, when constants fix
    them; None when they are not known."""
    if position != 0:
        return None
    if reader.op_type == "StridedSlice" and len(reader.inputs) == 4:
        return _strided_rows(reader, total, producers)
    if reader.op_type == "Slice" and len(reader.inputs) == 3:
        begin, size = (_first(reader.inputs[k], producers) for k in (1, 2))
        if begin is None or size is None or begin < 0:
            return None
        end = total if size == -1 else begin + size
        return set(range(begin, min(end, total)))
    if reader.op_type in ("GatherV2", "Gather") and reader.attrs.get("batch_dims", 0) == 0:
        if reader.op_type == "GatherV2":
            axis = constant_of(reader.inputs[2], producers) if len(reader.inputs) == 3 else None
            if axis is None or axis.shape != () or not axis.all_equal(0):
                return None
        indices = constant_of(reader.inputs[1], producers)
        if indices is None or indices.size > 64:
            return None
        taken = {int(i) for i in indices.flat()}
        return taken if all(0 <= i < total for i in taken) else None
    return None


def _strided_rows(reader: Node, total: int, producers: Mapping[str, Node]) -> set[int] | None:
    if reader.attrs.get("ellipsis_mask", 1) or reader.attrs.get("new_axis_mask", 1):
        return None
    begin, end, stride = (_first(reader.inputs[k], producers) for k in (1, 2, 3))
    if begin is None or end is None or not stride:
        return None
    if reader.attrs.get("shrink_axis_mask", 0) & 1:
        row = begin + total if begin < 0 else begin
        return {row} if 0 <= row < total else None
    start = None if reader.attrs.get("begin_mask", 1) & 1 else begin
    stop = None if reader.attrs.get("end_mask", 1) & 1 else end
    return set(range(total)[slice(start, stop, stride)])


def _first(ref: TensorRef, producers: Mapping[str, Node]) -> int | None:
    """The first element of a constant 1-D integer vector."""
    value = constant_of(ref, producers)
    if value is None or len(value.shape) != 1 or not value.shape[0] or not value.elements:
        return None
    first = value.elements[0]
    return first if isinstance(first, int) and not isinstance(first, bool) else None
