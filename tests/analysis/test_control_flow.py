"""Every control-flow op through the three walkers: statuses, cuts and routes, concerns."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradcheck_cli.analysis import control_flow
from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.control_flow import Step, StepKind, step_of
from gradcheck_cli.analysis.verdicts import Analysis, ConcernKind, Status, Unreached
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.flat_nodes import FlatNodes, Tables
from gradcheck_cli.graph.model import Body, Node, Program, TensorRef
from tests.graph_factory import BodyFactory, program

FLOAT2 = ("float32", "float32")


def _verdicts(analysis: Analysis) -> dict[str, tuple[Status, list[tuple[str, Reason, str | None]]]]:
    """Per variable: its status and its blockers as (op, reason, function)."""
    return {
        v.name: (v.status, [(b.op, b.reason, b.function) for b in v.blockers])
        for v in analysis.verdicts
    }


def _concerns(analysis: Analysis) -> set[tuple[ConcernKind, str, str | None, tuple[str, ...]]]:
    return {(c.kind, c.op, c.function, c.variables) for c in analysis.concerns}


def _pair_function(name: str, *, cut_second: bool = True, unused_stop: bool = False) -> Body:
    """(a, b) -> (a * a, stop_gradient(b)): the first argument carries gradient, the second not."""
    f = BodyFactory(name)
    a, b = f.arg("a"), f.arg("b")
    squared = f.op("squared", "Mul", a, a)
    second = f.op("stop", "StopGradient", b) if cut_second else f.op("twice", "AddV2", b, b)
    if unused_stop:
        f.op("idle_stop", "StopGradient", a)
    return f.body(squared, second)


# -- stepping, op by op --------------------------------------------------------------------------


_IF = {"then_branch": ("t",), "else_branch": ("e",)}
_WHILE = {"body": ("body",), "cond": ("cond",)}


@pytest.mark.parametrize(
    ("op_type", "calls", "expected"),
    [
        ("If", _IF, Step(StepKind.IF, ("t", "e"))),
        ("StatelessIf", _IF, Step(StepKind.IF, ("t", "e"))),
        ("Case", {"branches": ("b0", "b1", "b2")}, Step(StepKind.CASE, ("b0", "b1", "b2"))),
        ("StatelessCase", {"branches": ("b0",)}, Step(StepKind.CASE, ("b0",))),
        ("While", _WHILE, Step(StepKind.LOOP, ("body",), "cond")),
        ("StatelessWhile", _WHILE, Step(StepKind.LOOP, ("body",), "cond")),
        ("PartitionedCall", {"f": ("fn",)}, Step(StepKind.CALL, ("fn",))),
        ("StatefulPartitionedCall", {"f": ("fn",)}, Step(StepKind.CALL, ("fn",))),
        ("fn", {"f": ("fn",)}, Step(StepKind.CALL, ("fn",))),
        # An op that merely carries a function attribute (a dataset map) is no call.
        ("MapDataset", {"f": ("fn",)}, Step(StepKind.PLAIN)),
        ("Mul", {}, Step(StepKind.PLAIN)),
    ],
)
def test_every_control_flow_op_maps_to_one_step(
    op_type: str, calls: dict[str, tuple[str, ...]], expected: Step
) -> None:
    assert step_of(Node("n", op_type, calls=calls)) == expected


def test_inputs_map_onto_arguments() -> None:
    branching = Step(StepKind.CASE, ("b0", "b1"))
    assert [branching.argument(i) for i in range(3)] == [None, 0, 1]
    assert [branching.input_of(a) for a in range(2)] == [1, 2]
    for kind in (StepKind.CALL, StepKind.LOOP):
        step = Step(kind, ("f",))
        assert [step.argument(i) for i in range(3)] == [0, 1, 2]
        assert [step.input_of(a) for a in range(3)] == [0, 1, 2]


def test_loop_summary_counts_only_runs_of_the_body_and_the_condition_shapes_everything() -> None:
    # body: (a, b, t) -> (a, a, a); the condition reads t.
    body = [0b111, 0, 0]
    condition = [0, 0, 1]
    assert control_flow.carried(body, 0b010, 3) == 0b010
    assert control_flow.carried(body, 0b001, 3) == 0b111
    assert control_flow.loop_summary(body, None, 3) == [0b111, 0, 0]
    # `a` becomes `t` after one run, and `t` decides how often the body runs.
    assert control_flow.loop_summary(body, condition, 3) == [0b111, 0, 0b111]


# -- calls -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["PartitionedCall", "StatefulPartitionedCall", "inner"])
def test_a_call_steps_into_its_callee(op_type: str) -> None:
    top = BodyFactory("top")
    w, v = top.arg("w"), top.arg("v")
    top.op("call", op_type, w, v, dtypes=FLOAT2, f=("inner",))
    loss = top.op("loss", "AddV2", TensorRef("call", 0), TensorRef("call", 1))
    prog = program(top.body(loss), loss, _pair_function("inner", unused_stop=True))
    analysis = analyse(prog)
    assert _verdicts(analysis) == {
        "w": (Status.OK, []),
        "v": (Status.BLOCKED, [("stop", Reason.STOP_GRADIENT, "inner")]),
    }
    (blocked,) = [v for v in analysis.verdicts if v.status is Status.BLOCKED]
    assert [(s.op, s.cut) for s in blocked.route] == [
        ("v", None),
        ("call", Reason.STOP_GRADIENT),
        ("loss", None),
    ]
    assert _concerns(analysis) == {
        (ConcernKind.STOP_GRADIENT_UNUSED, "idle_stop", "inner", ()),
    }


def test_a_call_forwards_an_argument_only_to_the_outputs_it_reaches() -> None:
    # w reaches only output 0, which an integer cast cuts; output 1 carries v's stop_gradient,
    # which is none of w's business.
    inner = BodyFactory("inner")
    a, b = inner.arg("a"), inner.arg("b")
    as_int = inner.op("as_int", "Cast", a, dtypes=("int32",))
    inner_body = inner.body(inner.op("back", "Cast", as_int), b)
    top = BodyFactory("top")
    w, v = top.arg("w"), top.arg("v")
    top.op("call", "PartitionedCall", w, v, dtypes=FLOAT2, f=("inner",))
    stopped = top.op("stopped", "StopGradient", TensorRef("call", 1))
    loss = top.op("loss", "AddV2", TensorRef("call", 0), stopped)
    analysis = analyse(program(top.body(loss), loss, inner_body))
    assert _verdicts(analysis) == {
        "w": (Status.BLOCKED, [("as_int", Reason.INTEGER_DTYPE, "inner")]),
        "v": (Status.BLOCKED, [("stopped", Reason.STOP_GRADIENT, None)]),
    }
    (w_verdict, _) = analysis.verdicts
    in_top = [e for e in w_verdict.subgraph if e.source_function is e.target_function is None]
    assert {(e.source, e.target) for e in in_top} == {("w", "call"), ("call", "loss")}
    # Inside the call: w's argument, the cut cast, and out of the function to the call op.
    assert {
        (e.source_function, e.source, e.target_function, e.target, e.cut)
        for e in w_verdict.subgraph
        if "inner" in (e.source_function, e.target_function)
    } == {
        (None, "w", "inner", "a", False),
        ("inner", "a", "inner", "as_int", True),
        ("inner", "as_int", "inner", "back", False),
        ("inner", "back", None, "call", False),
    }
    assert [(n.caller, n.function, n.role, n.arguments) for n in w_verdict.nested] == [
        ("call", "inner", "f", (("a", 0),))
    ]


def test_a_stop_gradient_after_a_call_that_already_cuts_is_redundant() -> None:
    inner = BodyFactory("inner")
    a = inner.arg("a")
    as_int = inner.op("as_int", "Cast", a, dtypes=("int32",))
    inner_body = inner.body(inner.op("back", "Cast", as_int))
    top = BodyFactory("top")
    w, v = top.arg("w"), top.arg("v")
    called = top.op("call", "StatefulPartitionedCall", w, f=("inner",))
    stopped = top.op("stopped", "StopGradient", called)
    loss = top.op("loss", "Mul", stopped, v)
    analysis = analyse(program(top.body(loss), loss, inner_body))
    assert _verdicts(analysis)["w"][0] is Status.BLOCKED
    assert _concerns(analysis) == {
        (ConcernKind.STOP_GRADIENT_REDUNDANT, "stopped", "top", ()),
    }


# -- conds and switch_cases ----------------------------------------------------------------------


def _branch(name: str, *, cut_first: bool) -> Body:
    """(x, y) -> x * y, with x behind a stop_gradient when `cut_first`."""
    f = BodyFactory(name)
    x, y = f.arg("x"), f.arg("y")
    first = f.op("stop", "StopGradient", x) if cut_first else x
    return f.body(f.op("product", "Mul", first, y))


@pytest.mark.parametrize(
    ("op_type", "role"),
    [
        ("If", "predicate"),
        ("StatelessIf", "predicate"),
        ("Case", "index"),
        ("StatelessCase", "index"),
    ],
)
def test_a_cut_in_one_branch_only_is_a_concern_and_the_selector_is_blocked(
    op_type: str, role: str
) -> None:
    top = BodyFactory("top")
    selector, x, y = top.arg("selector"), top.arg("x"), top.arg("y")
    calls = (
        {"then_branch": ("passes",), "else_branch": ("cuts",)}
        if role == "predicate"
        else {"branches": ("passes", "cuts")}
    )
    top.op("choose", op_type, selector, x, y, **calls)
    loss = top.op("loss", "Sum", TensorRef("choose"))
    branches = (_branch("passes", cut_first=False), _branch("cuts", cut_first=True))
    analysis = analyse(program(top.body(loss), loss, *branches))
    assert _verdicts(analysis) == {
        "selector": (Status.BLOCKED, [("choose", Reason.INDEX_OR_SHAPE_INPUT, None)]),
        "x": (Status.OK, []),
        "y": (Status.OK, []),
    }
    assert _concerns(analysis) == {(ConcernKind.CUT_IN_BRANCH, "choose", "top", ("x",))}
    (concern,) = analysis.concerns
    assert ("else-branch" if role == "predicate" else "branch 1 ") in concern.detail


@pytest.mark.parametrize("op_type", ["If", "StatelessIf", "Case", "StatelessCase"])
def test_a_variable_cut_in_every_branch_is_blocked_in_each(op_type: str) -> None:
    top = BodyFactory("top")
    selector, x, y = top.arg("selector"), top.arg("x"), top.arg("y")
    calls = (
        {"then_branch": ("one",), "else_branch": ("two",)}
        if op_type.endswith("If")
        else {"branches": ("one", "two")}
    )
    top.op("choose", op_type, selector, x, y, **calls)
    loss = top.op("loss", "Sum", TensorRef("choose"))
    branches = (_branch("one", cut_first=True), _branch("two", cut_first=True))
    analysis = analyse(program(top.body(loss), loss, *branches))
    assert _verdicts(analysis)["x"] == (
        Status.BLOCKED,
        [("stop", Reason.STOP_GRADIENT, "one"), ("stop", Reason.STOP_GRADIENT, "two")],
    )
    assert _verdicts(analysis)["y"] == (Status.OK, [])
    assert not analysis.concerns


# -- while loops ---------------------------------------------------------------------------------


def _loop(op_type: str) -> Program:
    """Loop variables (i, a, b, t, c); body: (i + 1, a * 2, a * 3, a, stop_gradient(c));
    the condition reads i and t. `b`'s first value is overwritten by the first run."""
    body = BodyFactory("body")
    i, a, b, t, c = (body.arg(n) for n in "iabtc")
    del b, t
    loop_body = body.body(
        body.op("next", "AddV2", i, i),
        body.op("doubled", "Mul", a, a),
        body.op("tripled", "Mul", a, a),
        a,
        body.op("stop", "StopGradient", c),
    )
    cond = BodyFactory("cond")
    ci, _, _, ct, _ = (cond.arg(n) for n in "iabtc")
    loop_cond = cond.body(cond.op("less", "Less", ci, ct, dtypes=("bool",)))
    top = BodyFactory("top")
    ins = [top.arg(n) for n in ("counter", "ax", "bx", "tx", "cx")]
    top.op("loop", op_type, *ins, dtypes=("float32",) * 5, body=("body",), cond=("cond",))
    total = top.op("total", "AddV2", TensorRef("loop", 1), TensorRef("loop", 4))
    stopped = top.op("stopped", "StopGradient", TensorRef("loop", 2))
    loss = top.op("loss", "AddV2", total, stopped)
    return program(top.body(loss), loss, loop_body, loop_cond)


@pytest.mark.parametrize("op_type", ["While", "StatelessWhile"])
def test_a_loop_carries_variables_and_its_condition_cuts(op_type: str) -> None:
    analysis = analyse(_loop(op_type))
    # What the condition reads decides how often the body runs, so it shapes every output,
    # the one behind the top-level stop_gradient too: that stop_gradient lies on a path with
    # one cut more, a side cut (removing it alone trains nothing).
    by_condition = [("loop", Reason.INDEX_OR_SHAPE_INPUT, None)]
    assert _verdicts(analysis) == {
        "counter": (Status.BLOCKED, by_condition),
        "ax": (Status.OK, []),
        # The body overwrites b before anything reads it: no run of the body passes it on.
        "bx": (Status.UNUSED, []),
        "tx": (Status.BLOCKED, by_condition),
        "cx": (Status.BLOCKED, [("stop", Reason.STOP_GRADIENT, "body")]),
    }
    assert {v.name: v.unreached for v in analysis.verdicts}["bx"] is Unreached.READ_NOT_REACHING
    side = {v.name: [(b.op, b.reason) for b in v.side_cuts] for v in analysis.verdicts}
    assert side["tx"] == side["counter"] == [("stopped", Reason.STOP_GRADIENT)]
    assert side["cx"] == side["ax"] == []


@pytest.mark.parametrize("op_type", ["While", "StatelessWhile"])
def test_a_loop_variable_that_reaches_the_condition_a_run_later_is_blocked_there(
    op_type: str,
) -> None:
    # The loss reads only output 4 (c), which `a` never reaches by value: `a` becomes `t` one
    # run of the body later, and `t` decides how often the body runs.
    prog = _loop(op_type)
    _set_nodes(prog, prog.top, Node("loss", "Sum", (TensorRef("loop", 4),), ("float32",)))
    analysis = analyse(prog)
    verdicts = _verdicts(analysis)
    assert verdicts["ax"] == (Status.BLOCKED, [("loop", Reason.INDEX_OR_SHAPE_INPUT, None)])
    assert verdicts["cx"] == (Status.BLOCKED, [("stop", Reason.STOP_GRADIENT, "body")])


@pytest.mark.parametrize("op_type", ["While", "StatelessWhile"])
def test_a_stop_gradient_on_an_overwritten_loop_variable_changes_nothing(op_type: str) -> None:
    # Output 2 holds a * 3 after the first run: only `a` reaches it, and only by data edges
    # once "tripled" becomes an integer round trip.
    prog = _loop(op_type)
    a = TensorRef("a")
    _set_nodes(
        prog,
        "body",
        Node("as_int", "Cast", (a,), ("int32",)),
        Node("tripled", "Cast", (TensorRef("as_int"),), ("float32",)),
    )
    analysis = analyse(prog)
    assert (ConcernKind.STOP_GRADIENT_REDUNDANT, "stopped", "top", ()) in _concerns(analysis)


# -- nesting -------------------------------------------------------------------------------------


def _nested() -> Program:
    """A while loop whose body runs a cond whose branches call a function (one by
    PartitionedCall, one directly): loop variables (i, a, b)."""
    then = BodyFactory("then")
    ta, tb = then.arg("a"), then.arg("b")
    then.op("call", "PartitionedCall", ta, tb, dtypes=FLOAT2, f=("pair",))
    then_body = then.body(TensorRef("call", 0), TensorRef("call", 1))
    other = BodyFactory("other")
    oa, ob = other.arg("a"), other.arg("b")
    other.op("call", "pair", oa, ob, dtypes=FLOAT2, f=("pair",))
    other_body = other.body(TensorRef("call", 0), TensorRef("call", 1))
    body = BodyFactory("body")
    i, a, b = body.arg("i"), body.arg("a"), body.arg("b")
    body.op(
        "choose",
        "StatelessIf",
        i,
        a,
        b,
        dtypes=FLOAT2,
        then_branch=("then",),
        else_branch=("other",),
    )
    loop_body = body.body(
        body.op("next", "AddV2", i, i), TensorRef("choose", 0), TensorRef("choose", 1)
    )
    cond = BodyFactory("cond")
    ci, _, _ = cond.arg("i"), cond.arg("a"), cond.arg("b")
    loop_cond = cond.body(cond.op("less", "Less", ci, ci, dtypes=("bool",)))
    top = BodyFactory("top")
    ins = [top.arg(n) for n in ("counter", "x", "y")]
    top.op("loop", "StatelessWhile", *ins, dtypes=("float32",) * 3, body=("body",), cond=("cond",))
    loss = top.op("loss", "AddV2", TensorRef("loop", 1), TensorRef("loop", 2))
    functions = (then_body, other_body, _pair_function("pair", unused_stop=True))
    return program(top.body(loss), loss, loop_body, loop_cond, *functions)


def test_a_call_inside_a_cond_inside_a_loop() -> None:
    analysis = analyse(_nested())
    assert _verdicts(analysis) == {
        "counter": (
            Status.BLOCKED,
            [
                ("choose", Reason.INDEX_OR_SHAPE_INPUT, "body"),
                # The branch it picks decides what later runs do with `b`.
                ("stop", Reason.STOP_GRADIENT, "pair"),
                ("loop", Reason.INDEX_OR_SHAPE_INPUT, None),
            ],
        ),
        "x": (Status.OK, []),
        "y": (Status.BLOCKED, [("stop", Reason.STOP_GRADIENT, "pair")]),
    }
    (y_verdict,) = [v for v in analysis.verdicts if v.name == "y"]
    assert [(s.op, s.cut) for s in y_verdict.route] == [
        ("y", None),
        ("loop", Reason.STOP_GRADIENT),
        ("loss", None),
    ]
    assert _concerns(analysis) == {(ConcernKind.STOP_GRADIENT_UNUSED, "idle_stop", "pair", ())}


def test_a_nested_cut_that_lets_gradient_through_is_no_cut() -> None:
    prog = _nested()
    prog.bodies["pair"] = _pair_function("pair", cut_second=False)
    assert {v.name: v.status for v in analyse(prog).verdicts} == {
        "counter": Status.BLOCKED,
        "x": Status.OK,
        "y": Status.OK,
    }


def test_an_output_without_a_declared_dtype_is_still_walked() -> None:
    # A loader that could not read an op's output types leaves them out; what reads output 1
    # still makes it exist, for the backward masks and the forward cut walk alike.
    top = BodyFactory("top")
    w, v = top.arg("w"), top.arg("v")
    top.op("split", "Unpack", w, dtypes=())
    top.op("call", "PartitionedCall", TensorRef("split", 1), v, dtypes=FLOAT2, f=("pair",))
    loss = top.op("loss", "AddV2", TensorRef("call", 0), TensorRef("call", 1))
    analysis = analyse(program(top.body(loss), loss, _pair_function("pair")))
    assert _verdicts(analysis) == {
        "w": (Status.OK, []),
        "v": (Status.BLOCKED, [("stop", Reason.STOP_GRADIENT, "pair")]),
    }


def test_every_walker_shares_one_index_per_body(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    original = control_flow.BodyIndex.__init__

    def counting(
        self: control_flow.BodyIndex, body: Body, extra: tuple[TensorRef, ...] = ()
    ) -> None:
        built.append(body.name)
        original(self, body, extra)

    monkeypatch.setattr(control_flow.BodyIndex, "__init__", counting)
    analysis = analyse(_nested(), cuts_of_live=True)
    assert analysis.verdicts
    assert sorted(built) == sorted(set(built))
    assert "top" in built and "pair" in built


def _set_nodes(prog: Program, body: str, *nodes: Node) -> None:
    """Put `nodes` into body `body` of `prog`, each in place of the node of its name."""
    old = prog.bodies[body]
    prog.bodies[body] = replace(old, nodes={**old.nodes, **{node.name: node for node in nodes}})


def test_a_subgraph_too_large_to_draw_is_left_out_and_counted() -> None:
    # Inside a called function, v's stop_gradient is followed by more ops than a subgraph
    # keeps; w's small subgraph beside it is kept whole. v's cut and route are still told.
    from gradcheck_cli.analysis.cuts import MAX_SUBGRAPH_EDGES

    inner = BodyFactory("inner")
    a, b = inner.arg("a"), inner.arg("b")
    tail = inner.op("stop", "StopGradient", b)
    for k in range(MAX_SUBGRAPH_EDGES):
        tail = inner.op(f"tanh_{k}", "Tanh", tail)
    inner_body = inner.body(inner.op("as_int", "Cast", a, dtypes=("int32",)), tail)
    top = BodyFactory("top")
    w, v = top.arg("w"), top.arg("v")
    top.op("call", "PartitionedCall", w, v, dtypes=("int32", "float32"), f=("inner",))
    summed = top.op("summed", "Cast", TensorRef("call", 0))
    loss = top.op("loss", "AddV2", summed, TensorRef("call", 1))
    analysis = analyse(program(top.body(loss), loss, inner_body))
    assert _verdicts(analysis) == {
        "w": (Status.BLOCKED, [("as_int", Reason.INTEGER_DTYPE, "inner")]),
        "v": (Status.BLOCKED, [("stop", Reason.STOP_GRADIENT, "inner")]),
    }
    w_verdict, v_verdict = analysis.verdicts
    assert w_verdict.subgraph and w_verdict.subgraph_ops and not w_verdict.subgraph_left_out
    assert v_verdict.subgraph == v_verdict.nested == v_verdict.subgraph_ops == ()
    assert v_verdict.subgraph_left_out > MAX_SUBGRAPH_EDGES
    assert [s.op for s in v_verdict.route] == ["v", "call", "loss"]


def _cast_function(name: str) -> Body:
    """a -> float(int(a)): no stop_gradient, and no gradient."""
    f = BodyFactory(name)
    as_int = f.op("as_int", "Cast", f.arg("a"), dtypes=("int32",))
    return f.body(f.op("back", "Cast", as_int))


def _stopping_functions() -> tuple[Body, Body]:
    """outer(a) = inner(a), inner(a) = stop_gradient(a): the stop_gradient two calls deep."""
    inner = BodyFactory("inner")
    inner_body = inner.body(inner.op("stop", "StopGradient", inner.arg("a")))
    outer = BodyFactory("outer")
    called = outer.op("call_inner", "PartitionedCall", outer.arg("a"), f=("inner",))
    return outer.body(outer.op("same", "Identity", called)), inner_body


def test_without_its_stop_gradients_a_variable_is_judged_through_every_function() -> None:
    # "What if no stop_gradient" reads the gradient pass's summary of a function that holds no
    # stop_gradient, and walks again one that holds one, however deep.
    top = BodyFactory("top")
    w, v = top.arg("w"), top.arg("v")
    # w: a stop_gradient two calls deep, and an integer cast on another path. Without the
    # stop_gradient w trains through the calls: the stop_gradient alone is why it does not.
    through = top.op("call_outer", "PartitionedCall", w, f=("outer",))
    cast = top.op("as_int", "Cast", w, dtypes=("int32",))
    w_loss = top.op("w_loss", "AddV2", through, top.op("back", "Cast", cast))
    # v: a stop_gradient after a call that casts to int: without it, v still gets nothing.
    stopped = top.op(
        "stopped", "StopGradient", top.op("call_cast", "PartitionedCall", v, f=("cast",))
    )
    loss = top.op("loss", "AddV2", w_loss, stopped)
    outer_body, inner_body = _stopping_functions()
    prog = program(top.body(loss), loss, outer_body, inner_body, _cast_function("cast"))
    analysis = analyse(prog)
    assert _verdicts(analysis) == {
        "w": (Status.BLOCKED, [("stop", Reason.STOP_GRADIENT, "inner")]),
        "v": (
            Status.BLOCKED,
            [("as_int", Reason.INTEGER_DTYPE, "cast"), ("stopped", Reason.STOP_GRADIENT, None)],
        ),
    }
    by_name = {verdict.name: verdict for verdict in analysis.verdicts}
    assert [(b.op, b.function) for b in by_name["v"].cuts_without_stop_gradient] == [
        ("as_int", "cast")
    ]
    assert not by_name["w"].cuts_without_stop_gradient


def _call_chain(levels: int, *, through_condition: bool = False) -> Program:
    """f0 calls f1 ... calls f{levels - 1}, which squares its argument; with
    `through_condition`, f0 runs a loop whose condition is the head of the chain instead."""
    bodies = []
    for level in range(1, levels):
        f = BodyFactory(f"f{level}")
        x = f.arg("x")
        callee = (f"f{level + 1}",) if level + 1 < levels else None
        if callee is None:
            bodies.append(f.body(f.op("squared", "Mul", x, x)))
        else:
            bodies.append(f.body(f.op("call", "PartitionedCall", x, f=callee)))
    top = BodyFactory("top")
    v = top.arg("v")
    if through_condition:
        body = BodyFactory("loop_body")
        y = body.arg("y")
        bodies.append(body.body(body.op("halved", "Mul", y, y)))
        loop = top.op("loop", "While", v, body=("loop_body",), cond=("f1",))
        loss = top.op("loss", "Sum", loop)
    else:
        loss = top.op("loss", "Sum", top.op("call", "PartitionedCall", v, f=("f1",)))
    return program(top.body(loss), loss, *bodies)


@pytest.mark.parametrize("through_condition", [False, True], ids=["calls", "loop condition"])
def test_functions_nested_past_the_limit_are_refused_and_below_it_analysed(
    through_condition: bool,
) -> None:
    from gradcheck_cli.analysis.analyse import MAX_NESTING
    from gradcheck_cli.errors import GradcheckError

    with pytest.raises(GradcheckError, match=f"{MAX_NESTING + 1} levels deep"):
        analyse(_call_chain(MAX_NESTING + 1, through_condition=through_condition))
    analysis = analyse(_call_chain(MAX_NESTING, through_condition=through_condition))
    assert [v.status for v in analysis.verdicts] == [Status.OK]


def _caller(tables: Tables, name: str, calls: dict[str, tuple[str, ...]]) -> Body:
    flat = FlatNodes(tables)
    flat.append("x", "_Arg", output_dtypes=("float32",))
    flat.append("call", "PartitionedCall", [("x", 0)], ("float32",), calls=calls)
    flat.append("out", "Tanh", [("call", 0)], ("float32",))
    return Body(name, flat.finish(), args=("x",), rets=(TensorRef("out", 0),))


def test_bodies_alike_but_for_their_callees_share_a_structure_a_plain_op_does_not() -> None:
    tables = Tables()
    callers = [_caller(tables, f"caller_{k}", {"f": (f"callee_{k}",)}) for k in range(3)]
    # The same op type naming no function is an ordinary op: not a call step.
    plain = _caller(tables, "plain", {})
    facts = [control_flow.BodyIndex(body) for body in (*callers, plain)]
    assert facts[1].arrays.structure is facts[2].arrays.structure
    assert facts[3].arrays.structure is not facts[1].arrays.structure
    assert [f.plain for f in facts] == [b"\x01\x00\x01"] * 3 + [b"\x01\x01\x01"]
    assert [f.arrays.flat.node(1).calls for f in facts] == [
        {"f": ("callee_0",)},
        {"f": ("callee_1",)},
        {"f": ("callee_2",)},
        {},
    ]
