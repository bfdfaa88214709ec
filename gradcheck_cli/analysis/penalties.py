"""Whether a variable that only `model.losses` train is only decayed by them, or tied by them
to what the data trains (a trainable prior that a KL term pulls towards its posterior)."""

from __future__ import annotations

from collections.abc import Iterable

from gradcheck_cli.analysis.reachability import Reachability, forward_reached
from gradcheck_cli.graph.arrays import TensorSet
from gradcheck_cli.graph.model import Program

# Ops whose output is a sum of linear maps of their inputs, one map per input: a value made of
# a variable's part and a trained part keeps the two apart through them (the gradient of the
# variable's part does not depend on the trained part). Their other inputs are integer shapes,
# indices or axes, which carry no gradient.
_ADDITIVE = frozenset(
    {
        "Add",
        "AddV2",
        "AddN",
        "Sub",
        "Neg",
        "BiasAdd",
        "ConcatV2",
        "Concat",
        "Pack",
        "Identity",
        "Snapshot",
        "StopGradient",
        "Sum",
        "Mean",
        "Reshape",
        "Squeeze",
        "ExpandDims",
        "Transpose",
        "StridedSlice",
        "Slice",
        "GatherV2",
        "Tile",
        "BroadcastTo",
        "Cast",
        "ReadVariableOp",
    }
)
# Ops linear in each input when the others are held fixed: a variable's part times a value
# that depends on no variable stays linear; times a trained value, the two are tied.
_MULTILINEAR = frozenset(
    {"Mul", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "Conv2D"}
)


def tied_to_trained(
    program: Program, variables: Iterable[str], trained: Iterable[str]
) -> frozenset[str]:
    """Of `variables` (names of variables the data loss leaves untrained), those whose gradient
    from the loss `program` computes depends on a variable of `trained` (names of those the
    data loss trains): an op where their values meet combines them other than by adding them
    up. The forward walks stay in the top body: a meeting inside a called function counts as
    a tie, which keeps a warning out rather than in."""
    by_name = {v.name: v.source for v in program.variables if v.source is not None}
    seeds = [by_name[name] for name in trained if name in by_name]
    asked = [name for name in variables if name in by_name]
    if not seeds or not asked:
        return frozenset()
    reach = Reachability(program, gradient=True)
    top = program.top_body
    from_trained = forward_reached(top, seeds, reach)
    return frozenset(
        name
        for name in asked
        if _meets(forward_reached(top, [by_name[name]], reach), from_trained, reach)
    )


def _meets(mine: TensorSet, trained: TensorSet, reach: Reachability) -> bool:
    """Whether an op on the way to the loss that reads a tensor of `mine` combines it with a
    trained value other than by a sum."""
    arrays = reach.index.of(reach.program.top_body).arrays
    flat = arrays.flat
    starts, input_tensors = arrays.input_start, arrays.input_tensors
    reader_start, reader_edges, edge_nodes = (
        arrays.reader_start,
        arrays.reader_edges,
        arrays.edge_nodes,
    )
    mine_marks, trained_marks = mine.marks, trained.marks
    offsets, live = arrays.offsets, reach.top_masks().values
    readers = {
        edge_nodes[edge]
        for t, marked in enumerate(mine_marks)
        if marked
        for edge in reader_edges[reader_start[t] : reader_start[t + 1]]
    }
    for n in readers:
        if not any(live[offsets[n] : offsets[n + 1]]):  # its value never reaches the loss
            continue
        op_type = flat.op_table.values[flat.op_types[n]]
        if op_type in _ADDITIVE:
            continue
        sides = [
            (bool(mine_marks[t]), bool(trained_marks[t]))
            for t in input_tensors[starts[n] : starts[n + 1]]
        ]
        if op_type in _MULTILINEAR:
            varying = [side for side in sides if any(side)]
            if len(varying) > 1 and any(m for m, _ in varying) and any(t for _, t in varying):
                return True
        elif any(m for m, _ in sides) and any(t for _, t in sides):
            return True
    return False
