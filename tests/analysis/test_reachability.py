"""The analysis mechanics on hand-made graphs: loops, calls, cycles, the order of cuts."""

from __future__ import annotations

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.verdicts import Status, Unreached
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import TensorRef
from tests.graph_factory import BodyFactory, program


def _statuses(prog) -> dict[str, Status]:  # type: ignore[no-untyped-def]
    return {v.name: v.status for v in analyse(prog).verdicts}


def test_cuts_are_listed_nearest_first_and_inherited_dtype_edges_are_hidden() -> None:
    top = BodyFactory("top")
    w = top.arg("w", "resource")
    read = top.op("read", "ReadVariableOp", w)
    scaled = top.op("scaled", "Mul", read, read)
    as_int = top.op("as_int", "Cast", scaled, dtypes=("int32",))
    xored = top.op("xored", "BitwiseXor", as_int, as_int, dtypes=("int32",))
    back = top.op("back", "Cast", xored)
    stopped = top.op("stopped", "StopGradient", back)
    loss = top.op("loss", "Sum", stopped)
    (verdict,) = analyse(program(top.body(loss), loss)).verdicts
    assert verdict.status is Status.BLOCKED
    assert [(b.op, b.reason) for b in verdict.blockers] == [
        ("as_int", Reason.INTEGER_DTYPE),
        ("xored", Reason.NON_DIFFERENTIABLE_OP),
        ("stopped", Reason.STOP_GRADIENT),
    ]


def test_loop_carried_variables_reach_the_loss_through_later_iterations() -> None:
    # body: (a, b, c) -> (a, a, b * 2): `a` reaches output 2 only after two iterations, and
    # the body never reads `c`, which only the loop condition sees.
    body = BodyFactory("body")
    a, b, c = body.arg("a"), body.arg("b"), body.arg("c")
    doubled = body.op("doubled", "Mul", b, b)
    loop_body = body.body(a, a, doubled)
    del c
    cond = BodyFactory("cond")
    cond.arg("a"), cond.arg("b"), cond.arg("c")
    less = cond.op("less", "Less", TensorRef("c"), TensorRef("c"), dtypes=("bool",))
    loop_cond = cond.body(less)
    top = BodyFactory("top")
    ins = [top.op(f"read_{n}", "ReadVariableOp", top.arg(n, "resource")) for n in ("x", "y", "z")]
    top.op("loop", "While", *ins, dtypes=("float32",) * 3, body=("body",), cond=("cond",))
    loss = top.op("loss", "Sum", TensorRef("loop", 2))
    statuses = _statuses(program(top.body(loss), loss, loop_body, loop_cond))
    assert statuses == {"x": Status.OK, "y": Status.OK, "z": Status.BLOCKED}


def test_a_variable_read_only_by_the_loop_condition_is_blocked_there() -> None:
    body = BodyFactory("body")
    i, acc, limit = body.arg("i"), body.arg("acc"), body.arg("limit")
    loop_body = body.body(body.op("next", "AddV2", i, i), body.op("acc2", "AddV2", acc, i), limit)
    cond = BodyFactory("cond")
    ci, _, climit = cond.arg("i"), cond.arg("acc"), cond.arg("limit")
    loop_cond = cond.body(cond.op("less", "Less", ci, climit, dtypes=("bool",)))
    top = BodyFactory("top")
    start = top.op("start", "ReadVariableOp", top.arg("start", "resource"))
    limit_value = top.op("limit", "ReadVariableOp", top.arg("limit", "resource"))
    top.op(
        "loop",
        "While",
        start,
        start,
        limit_value,
        dtypes=("float32",) * 3,
        body=("body",),
        cond=("cond",),
    )
    loss = top.op("loss", "Sum", TensorRef("loop", 1))
    verdicts = {
        v.name: v for v in analyse(program(top.body(loss), loss, loop_body, loop_cond)).verdicts
    }
    assert verdicts["start"].status is Status.OK
    assert verdicts["limit"].status is Status.BLOCKED
    assert [(b.op, b.reason) for b in verdicts["limit"].blockers] == [
        ("loop", Reason.INDEX_OR_SHAPE_INPUT)
    ]


def test_cycles_terminate() -> None:
    # TF1 control flow: Merge <- NextIteration <- Merge forms a cycle.
    top = BodyFactory("top")
    w = top.op("read", "Identity", top.arg("w", "float32_ref"))
    top.nodes["merge"] = top.nodes.get("merge") or None  # type: ignore[assignment]
    from gradcheck_cli.graph.model import Node

    top.nodes["merge"] = Node("merge", "Merge", (w, TensorRef("next")), ("float32", "int32"))
    top.op("step", "Mul", TensorRef("merge"), TensorRef("merge"))
    top.op("next", "NextIteration", TensorRef("step"))
    loss = top.op("loss", "Sum", TensorRef("merge"))
    assert _statuses(program(top.body(loss), loss)) == {"w": Status.OK}


def test_frozen_and_unused() -> None:
    top = BodyFactory("top")
    used = top.op("read", "ReadVariableOp", top.arg("used", "resource"))
    top.arg("idle", "resource")
    top.arg("frozen", "resource")
    loss = top.op("loss", "Sum", used)
    statuses = _statuses(program(top.body(loss), loss, trainable={"frozen": False}))
    assert statuses == {"used": Status.OK, "idle": Status.UNUSED, "frozen": Status.FROZEN}


def test_a_value_assigned_away_is_told_with_the_assignment_its_walk_finds_first() -> None:
    # `w` feeds two assignments, into `near` (two steps) and `far` (three); `u` feeds only the
    # variable side of one, and `x` only ops that no assignment reads: neither is assigned away.
    top = BodyFactory("top")
    w, u, x = top.arg("w", "resource"), top.arg("u", "resource"), top.arg("x", "resource")
    near, far = top.arg("near", "resource"), top.arg("far", "resource")
    read = top.op("read", "ReadVariableOp", w)
    top.op("to_near", "AssignVariableOp", near, top.op("copy", "Identity", read), dtypes=())
    scaled = top.op("scaled", "Mul", top.op("twice", "AddV2", read, read), read)
    top.op("to_far", "AssignVariableOp", far, scaled, dtypes=())
    top.op("into_u", "AssignVariableOp", u, top.op("one", "Const"), dtypes=())
    top.op(
        "side", "Mul", top.op("read_x", "ReadVariableOp", x), top.op("read_u", "ReadVariableOp", u)
    )
    loss = top.op(
        "loss",
        "AddV2",
        top.op("read_near", "ReadVariableOp", near),
        top.op("read_far", "ReadVariableOp", far),
    )
    verdicts = {v.name: v for v in analyse(program(top.body(loss), loss)).verdicts}
    assert verdicts["w"].unreached is Unreached.ASSIGNED_AWAY
    assert verdicts["w"].assigned_to is not None and verdicts["w"].assigned_to.name == "near"
    assert {verdicts[name].unreached for name in ("u", "x")} == {Unreached.READ_NOT_REACHING}
    assert verdicts["u"].assigned_to is None and verdicts["x"].assigned_to is None
    assert (verdicts["near"].status, verdicts["far"].status) == (Status.OK, Status.OK)
