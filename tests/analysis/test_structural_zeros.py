"""Zero gradients fixed by constants in the graph, and shape reads folded into constants, on
hand-made graphs."""

from __future__ import annotations

import random

import pytest

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.structural_zeros import (
    a_factor_may_be_zero,
    products_with_a_zero_factor,
)
from gradcheck_cli.graph.flat_nodes import FlatNodes
from gradcheck_cli.graph.model import CONSTANT_ATTR, Constant, Program, TensorRef
from tests.graph_factory import BodyFactory, program


def _verdicts(prog: Program) -> dict[str, VariableVerdict]:
    return {v.name: v for v in analyse(prog).verdicts}


def _reasons(verdict: VariableVerdict) -> list[tuple[str, Reason]]:
    return [(b.op, b.reason) for b in verdict.blockers]


def _reads(top: BodyFactory, *names: str) -> list[TensorRef]:
    return [top.op(f"read_{n}", "ReadVariableOp", top.arg(n, "resource")) for n in names]


def test_a_product_with_a_constant_zero_gives_a_zero_gradient() -> None:
    top = BodyFactory("top")
    live, scaled, zero_filled, nonzero = _reads(top, "live", "scaled", "filled", "nonzero")
    zero = top.const("zero", (), 0.0)
    fill = top.op("fill", "Fill", top.const("dims", (1,), 4, dtype="int32"), zero)
    parts = [
        live,
        top.op("times_zero", "Mul", zero, scaled),
        top.op("times_fill", "Mul", zero_filled, fill),
        top.op("times_half", "Mul", top.const("half", (2,), 0.0, 0.5), nonzero),
    ]
    loss = top.op("loss", "AddN", *parts)
    verdicts = _verdicts(program(top.body(loss), loss))
    assert verdicts["live"].status is Status.OK
    assert verdicts["nonzero"].status is Status.OK
    assert _reasons(verdicts["scaled"]) == [("times_zero", Reason.ZERO_GRADIENT)]
    assert _reasons(verdicts["filled"]) == [("times_fill", Reason.ZERO_GRADIENT)]


def test_products_of_one_kind_are_judged_by_their_own_factors() -> None:
    # The analysis judges the nodes of one kind once, but a product is judged by its factors:
    # a zero behind identities, or a zeros_like, still cuts, though an equal product did not.
    top = BodyFactory("top")
    live, behind, like = _reads(top, "live", "behind", "like")
    zero = top.op("zero_copy", "Identity", top.op("zero_id", "Identity", top.const("z", (), 0.0)))
    parts = [
        top.op("times_live", "Mul", live, live),
        top.op("times_copied_zero", "Mul", behind, zero),
        top.op("times_zeros_like", "Mul", top.op("zeros", "ZerosLike", like), like),
        top.op("times_live_again", "Mul", live, live),
    ]
    loss = top.op("loss", "AddN", *parts)
    verdicts = _verdicts(program(top.body(loss), loss))
    assert verdicts["live"].status is Status.OK
    assert _reasons(verdicts["behind"]) == [("times_copied_zero", Reason.ZERO_GRADIENT)]
    assert _reasons(verdicts["like"]) == [("times_zeros_like", Reason.ZERO_GRADIENT)]


def test_a_where_on_a_constant_condition_gives_the_branch_never_taken_a_zero_gradient() -> None:
    top = BodyFactory("top")
    taken, never, unknown_x, unknown_y = _reads(top, "taken", "never", "unknown_x", "unknown_y")
    always = top.const("always", (2,), True, dtype="bool")
    some = top.const("some", (2,), True, False, dtype="bool")
    chosen = top.op("chosen", "SelectV2", always, taken, never)
    mixed = top.op("mixed", "SelectV2", some, unknown_x, unknown_y)
    loss = top.op("loss", "AddV2", chosen, mixed)
    verdicts = _verdicts(program(top.body(loss), loss))
    assert _reasons(verdicts["never"]) == [("chosen", Reason.ZERO_GRADIENT)]
    alive = {"taken", "unknown_x", "unknown_y"}
    assert {n for n, v in verdicts.items() if v.status is Status.OK} == alive


def test_stack_and_concat_pieces_that_constant_slices_leave_out_get_zero_gradients() -> None:
    top = BodyFactory("top")
    first, second, third, gathered, concat_kept, concat_dropped = _reads(
        top, "first", "second", "third", "gathered", "concat_kept", "concat_dropped"
    )
    stacked = top.op("stacked", "Pack", first, second, third, attrs={"axis": 0})
    sliced = top.op(
        "sliced",
        "StridedSlice",
        stacked,
        top.const("begin", (1,), 1, dtype="int32"),
        top.const("end", (1,), 2, dtype="int32"),
        top.const("stride", (1,), 1, dtype="int32"),
        attrs={"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0},
    )
    picked = top.op(
        "picked",
        "GatherV2",
        stacked,
        top.const("rows", (1,), 2, dtype="int32"),
        top.const("axis0", (), 0, dtype="int32"),
        attrs={"batch_dims": 0},
    )
    lone = top.op("lone", "Pack", gathered, attrs={"axis": 0})
    joined = top.op(
        "joined", "ConcatV2", concat_kept, concat_dropped, top.const("axis", (), 0, dtype="int32")
    )
    head = top.op(
        "head",
        "Slice",
        joined,
        top.const("at", (1,), 0, dtype="int32"),
        top.const("size", (1,), 3, dtype="int32"),
    )
    loss = top.op("loss", "AddN", sliced, picked, lone, head)
    prog = program(top.body(loss), loss)
    shapes = {"concat_kept": (3, 2), "concat_dropped": (2, 2)}
    for variable in prog.variables:
        variable.shape = shapes.get(variable.name, (2,))
    verdicts = _verdicts(prog)
    assert _reasons(verdicts["first"]) == [("stacked", Reason.ZERO_GRADIENT)]
    assert _reasons(verdicts["concat_dropped"]) == [("joined", Reason.ZERO_GRADIENT)]
    alive = {"second", "third", "gathered", "concat_kept"}
    assert {n for n, v in verdicts.items() if v.status is Status.OK} == alive


def test_unknown_sizes_and_unknown_readers_keep_a_piece_alive() -> None:
    top = BodyFactory("top")
    kept, unsized, returned = _reads(top, "kept", "unsized", "returned")
    # A concat whose pieces' sizes are unknown, and a stack that is also returned as it is.
    joined = top.op("joined", "ConcatV2", kept, unsized, top.const("axis", (), 0, dtype="int32"))
    head = top.op(
        "head",
        "Slice",
        joined,
        top.const("at", (1,), 0, dtype="int32"),
        top.const("size", (1,), 1, dtype="int32"),
    )
    stacked = top.op("stacked", "Pack", returned, returned, attrs={"axis": 0})
    first = top.op(
        "first",
        "GatherV2",
        stacked,
        top.const("row", (1,), 0, dtype="int32"),
        top.const("axis0", (), 0, dtype="int32"),
    )
    loss = top.op("loss", "AddV2", head, first)
    prog = program(top.body(loss, stacked), loss)
    statuses = {n: v.status for n, v in _verdicts(prog).items()}
    assert statuses == {"kept": Status.OK, "unsized": Status.OK, "returned": Status.OK}


def test_a_shape_tensorflow_folded_into_a_constant_still_reads_the_variable() -> None:
    # tf.shape(v) of a static shape: the read sits in the op's scope, unused; a Const named
    # after the scope stands for the shape.
    top = BodyFactory("top")
    live = top.op("read_live", "ReadVariableOp", top.arg("live", "resource"))
    top.op("Shape_1/ReadVariableOp", "ReadVariableOp", top.arg("shaped", "resource"))
    top.op("zeros_like/ReadVariableOp", "ReadVariableOp", top.arg("zeroed", "resource"))
    top.op("other", "ReadVariableOp", top.arg("other", "resource"))
    shape = top.const("Shape_1", (1,), 2, dtype="int32")
    as_float = top.op("as_float", "Cast", shape)
    zeros = top.const("zeros_like", (2,), 0.0)
    loss = top.op("loss", "AddN", live, as_float, zeros)
    verdicts = _verdicts(program(top.body(loss), loss))
    assert verdicts["live"].status is Status.OK
    assert _reasons(verdicts["shaped"]) == [("Shape_1", Reason.INDEX_OR_SHAPE_INPUT)]
    assert _reasons(verdicts["zeroed"]) == [("zeros_like", Reason.INDEX_OR_SHAPE_INPUT)]
    assert verdicts["other"].status is Status.UNUSED


@pytest.mark.parametrize("zero", ["const", "zeros_like", "fill", "none"])
def test_the_products_a_zero_may_reach_are_found_from_the_zeros(zero: str) -> None:
    # Without a zero constant, zeros_like or fill, no product is judged by its factors; with
    # one (even behind an identity), the product it feeds is cut and the others are not.
    top = BodyFactory("top")
    fed, other = _reads(top, "fed", "other")
    factor = {
        "const": lambda: top.const("zero", (), 0.0),
        "zeros_like": lambda: top.op("zeros", "ZerosLike", other),
        "fill": lambda: top.op(
            "fill", "Fill", top.const("dims", (1,), 4, dtype="int32"), top.const("nought", (), 0.0)
        ),  # fmt: skip
        "none": lambda: top.const("two", (), 2.0),
    }[zero]()
    parts = [
        top.op("times", "Mul", top.op("copy", "Identity", factor), fed),
        top.op("squared", "Mul", other, top.const("three", (), 3.0)),
    ]
    loss = top.op("loss", "AddN", *parts)
    prog = program(top.body(loss), loss)
    flat = prog.top_body.nodes
    products = bytes(flat.op_type(n) == "Mul" for n in range(len(flat)))
    cut = {flat.names[n] for n in products_with_a_zero_factor(flat, products)}
    assert cut == (set() if zero == "none" else {"times"})
    verdicts = _verdicts(prog)
    assert verdicts["other"].status is Status.OK
    if zero == "none":
        assert verdicts["fed"].status is Status.OK
    else:
        assert _reasons(verdicts["fed"]) == [("times", Reason.ZERO_GRADIENT)]


def test_products_found_from_the_zeros_are_those_a_walk_from_each_factor_finds() -> None:
    """On random bodies (zero and nonzero constants, zeros_like, fill, chains of identities
    longer and shorter than the walk's hops, factors read at output 1, products of one or
    three inputs), the products found forward from the zeros are the ones whose factors'
    walk back finds a zero."""
    rng = random.Random(7)
    cut_some = 0
    for _ in range(300):
        flat = FlatNodes()
        made = []
        for k in range(rng.randint(5, 80)):
            kind = rng.random()
            name = f"n{k}"
            if kind < 0.15 or not made:
                value = Constant((), (rng.choice([0.0, 0.0, 1.0]),))
                flat.append(name, "Const", (), ("float32",), attrs={CONSTANT_ATTR: value})
            elif kind < 0.2:
                flat.append(name, rng.choice(["ZerosLike", "Fill"]), [rng.choice(made)])
            elif kind < 0.55:  # chains of them: mostly reading the node just made
                op = rng.choice(["Identity", "Identity", "Snapshot", "ReadVariableOp"])
                inputs = [made[-1] if rng.random() < 0.7 else rng.choice(made)]
                inputs += [rng.choice(made)] * rng.choice([0, 0, 1])  # the first is followed
                flat.append(name, op, inputs, ("float32", "float32"))
            elif kind < 0.9:
                inputs = [rng.choice(made) for _ in range(rng.choice([2, 2, 2, 1, 3]))]
                flat.append(name, rng.choice(["Mul", "MulNoNan", "AddV2"]), inputs)
            else:
                flat.append(name, "Tanh", [rng.choice(made)])
            made.append((name, 0) if rng.random() < 0.9 else (name, 1))
        flat.finish()
        products = bytes(flat.op_type(n) in ("Mul", "MulNoNan") for n in range(len(flat)))
        expected = {n for n in range(len(flat)) if products[n] and a_factor_may_be_zero(flat, n)}
        assert products_with_a_zero_factor(flat, products) == expected
        cut_some += bool(expected)
    assert cut_some > 100


@pytest.mark.parametrize("identities", [0, 7, 8])
def test_a_zero_is_followed_through_as_many_identities_as_the_walk_back_is(identities: int) -> None:
    flat = FlatNodes()
    zero = Constant((), (0.0,))
    flat.append("zero", "Const", (), ("float32",), attrs={CONSTANT_ATTR: zero})
    flat.append("x", "_Arg", (), ("float32",))
    last = "zero"
    for k in range(identities):
        flat.append(f"copy_{k}", "Identity", [(last, 0)])
        last = f"copy_{k}"
    flat.append("times", "Mul", [("x", 0), (last, 0)])
    flat.finish()
    products = bytes(flat.op_type(n) == "Mul" for n in range(len(flat)))
    found = products_with_a_zero_factor(flat, products)
    assert bool(found) is a_factor_may_be_zero(flat, flat.ids["times"]) is (identities <= 7)
