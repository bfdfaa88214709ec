"""The analysis mechanics on hand-made graphs: loops, calls, cycles, the order of cuts."""

from __future__ import annotations

import random

import pytest

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.control_flow import ProgramIndex
from gradcheck_cli.analysis.reachability import Reachability
from gradcheck_cli.analysis.verdicts import Status, Unreached
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.rules import STOP_GRADIENT_OPS
from gradcheck_cli.graph.model import Body, Program, TensorRef
from tests.graph_factory import BodyFactory, program

FLOAT2 = ("float32", "float32")


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


def _top_k(index_only: bool) -> Program:
    """w -> TopKV2 (float values, int32 indices) -> the loss, from the indices alone or from
    both outputs."""
    top = BodyFactory("top")
    read = top.op("read", "ReadVariableOp", top.arg("w", "resource"))
    k = top.const("k", (), 2, dtype="int32")
    top.op("top_k", "TopKV2", read, k, dtypes=("float32", "int32"))
    indices = top.op("indices", "Sum", TensorRef("top_k", 1), dtypes=("int32",))
    if index_only:
        return program(top.body(indices), indices)
    as_float = top.op("as_float", "Cast", indices)
    loss = top.op("loss", "AddV2", top.op("values", "Sum", TensorRef("top_k", 0)), as_float)
    return program(top.body(loss), loss)


def test_a_value_that_becomes_an_integer_at_an_op_with_a_float_output_is_cut_there() -> None:
    # tf.argsort: TopKV2 passes gradient to its input from its values, never from its indices;
    # the indices alone lead to the loss (an int32 one), so the variable is cut at the TopKV2.
    (verdict,) = analyse(_top_k(index_only=True)).verdicts
    assert verdict.status is Status.BLOCKED
    assert [(b.op, b.reason) for b in verdict.blockers] == [("top_k", Reason.INTEGER_DTYPE)]
    assert "int32 output 1" in verdict.blockers[0].message
    assert [step.op for step in verdict.route if step.cut] == ["top_k"]
    # The values lead to the loss too: the variable trains through them.
    assert _statuses(_top_k(index_only=False)) == {"w": Status.OK}


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


def _random_calls(seed: int) -> Program:
    """Functions of two arguments and two rets calling one another at random: calls whose
    outputs no one reads, calls back up the chain (cycles, a function calling itself),
    stop_gradients, integer casts, loops whose body is one of the functions."""
    rng = random.Random(seed)
    names = [f"f{k}" for k in range(8)]
    bodies = []
    for name in names:
        f = BodyFactory(name)
        made = [f.arg("a"), f.arg("b")]
        for k in range(rng.randint(2, 7)):
            pick = [rng.choice(made), rng.choice(made)]
            kind = rng.random()
            if kind < 0.35:
                callee = rng.choice(names)
                op = rng.choice(["PartitionedCall", "StatefulPartitionedCall", "While"])
                calls = (
                    {"body": (callee,), "cond": (rng.choice(names),)}
                    if op == "While"
                    else {"f": (callee,)}
                )
                out = f.op(f"call_{k}", op, *pick, dtypes=FLOAT2, **calls)
                made += [out, TensorRef(out.node, 1)]
            elif kind < 0.45:
                made.append(f.op(f"stop_{k}", "StopGradient", pick[0]))
            elif kind < 0.52:
                made.append(f.op(f"int_{k}", "Cast", pick[0], dtypes=("int32",)))
            else:
                made.append(f.op(f"op_{k}", rng.choice(["AddV2", "Mul"]), *pick))
        floats = [ref for ref in made if f.nodes[ref.node].output_dtypes[ref.index] != "int32"]
        bodies.append(
            Body(name, f.nodes, args=tuple(f.args), rets=(rng.choice(floats), floats[-1]))
        )
    top = BodyFactory("top")
    variables = [top.arg(f"w{k}") for k in range(6)]
    outputs = []
    for k in range(4):
        call = top.op(f"top_call_{k}", "PartitionedCall", *rng.sample(variables, 2),
                      dtypes=FLOAT2, f=(rng.choice(names),))  # fmt: skip
        outputs.append(TensorRef(call.node, rng.randint(0, 1)))
    loss = top.op("loss", "AddN", *outputs)
    return program(top.body(loss), loss, *bodies)


def test_callees_summarised_first_give_what_the_walks_recursion_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Summaries made ahead of a walk, callees first, are the ones the walk's own recursion
    makes: on random call graphs with cycles, unread calls and loops, every verdict,
    explanation and concern is the same with and without them."""
    cyclic, statuses = 0, set()
    for seed in range(60):
        with_first = analyse(_random_calls(seed))
        with monkeypatch.context() as patched:
            patched.setattr(Reachability, "_callees_first", lambda self, name: None)
            recursive = analyse(_random_calls(seed))
        assert with_first == recursive, seed
        cyclic += _has_cycle(_random_calls(seed))
        statuses |= {v.status for v in with_first.verdicts}
    assert cyclic > 10  # the random graphs do hold cycles
    assert {Status.OK, Status.BLOCKED, Status.UNUSED} <= statuses


def _has_cycle(prog: Program) -> bool:
    calls = {name: body.nodes.functions_named() for name, body in prog.bodies.items()}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for callee in calls.get(start, ()):
            if callee == target or callee not in seen and reaches(callee, target, seen | {callee}):
                return True
        return False

    return any(reaches(name, name, set()) for name in calls)


def test_which_functions_may_stop_gradient_is_what_a_recursion_over_the_calls_finds() -> None:
    """`ProgramIndex.may_stop_gradient` walks the calls with a stack of its own: asked in any
    order on random call graphs with cycles, it answers as the recursion it stands for."""
    stopping = 0
    for seed in range(60):
        prog = _random_calls(seed)
        known: dict[str, bool] = {}
        index = ProgramIndex(prog)
        order = [*prog.bodies, "missing"]
        random.Random(seed).shuffle(order)
        answers = [index.may_stop_gradient(name) for name in order]
        assert answers == [_stops_by_recursion(prog, name, known) for name in order], seed
        stopping += sum(answers)
    assert 0 < stopping < 60 * 9  # some functions may stop gradient, some may not


def _stops_by_recursion(prog: Program, name: str, known: dict[str, bool]) -> bool:
    if name in known:
        return known[name]
    if name not in prog.bodies:
        return False
    known[name] = True  # a recursive call: assume it may
    flat = prog.bodies[name].nodes
    known[name] = any(flat.op_type(n) in STOP_GRADIENT_OPS for n in range(len(flat))) or any(
        _stops_by_recursion(prog, callee, known) for callee in sorted(flat.functions_named())
    )
    return known[name]
