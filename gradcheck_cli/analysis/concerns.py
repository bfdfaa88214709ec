"""Suspicious but not fatal: stop_gradients that do nothing, cuts in only one branch of a cond."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable

from gradcheck_cli.analysis.control_flow import StepKind, reach_of, step_of
from gradcheck_cli.analysis.reachability import Reachability
from gradcheck_cli.analysis.verdicts import Analysis, Concern, ConcernKind, Status
from gradcheck_cli.differentiability.rules import STOP_GRADIENT_OPS
from gradcheck_cli.graph.model import Body, Node, Program, TensorRef

_Reached = Callable[[], set[TensorRef]]
"""The tensors a forward walk reaches, walked on the first call (only when a node asks)."""
_PASS_THROUGH = frozenset({"Identity", "ReadVariableOp", "Enter", "Switch"})


def find_concerns(
    program: Program, gradient: Reachability, structural: Reachability
) -> tuple[Concern, ...]:
    """One forward pass from the trainable variables, structurally and over gradient edges."""
    top = program.top_body
    index = structural.index
    sources = [v.source for v in program.variables if v.trainable and v.source is not None]
    # The forward passes cost a walk of the graph each: only taken when a node asks for them.
    reached = functools.cache(lambda: _forward(top, sources, structural))
    reached_with_gradient = functools.cache(lambda: _forward(top, sources, gradient))
    live = gradient.top_masks()
    concerns: list[Concern] = []
    consumed = index.of(top).consumed
    for node in top.nodes.values():
        if node.op_type in STOP_GRADIENT_OPS and node.inputs:
            concerns.extend(
                _stop_gradient_concern(top, node, consumed, reached, reached_with_gradient)
            )
        elif step_of(node).selects:
            concerns.extend(
                _branch_concerns(
                    program, top, node, reached_with_gradient, live, gradient, structural
                )
            )
    for body in program.bodies.values():
        if body is top:
            continue
        used = index.of(body).consumed
        for node in body.nodes.values():
            if node.op_type in STOP_GRADIENT_OPS and TensorRef(node.name, 0) not in used:
                concerns.append(_concern(ConcernKind.STOP_GRADIENT_UNUSED, body, node))
    return tuple(concerns)


def _stop_gradient_concern(
    body: Body,
    node: Node,
    consumed: frozenset[TensorRef],
    reached: _Reached,
    reached_with_gradient: _Reached,
) -> Iterable[Concern]:
    if TensorRef(node.name, 0) not in consumed:
        yield _concern(ConcernKind.STOP_GRADIENT_UNUSED, body, node)
    elif node.inputs[0] not in reached():
        yield _concern(ConcernKind.STOP_GRADIENT_NO_EFFECT, body, node)
    elif node.inputs[0] not in reached_with_gradient():
        yield _concern(ConcernKind.STOP_GRADIENT_REDUNDANT, body, node)


def _branch_concerns(
    program: Program,
    body: Body,
    node: Node,
    reached_with_gradient: _Reached,
    live: dict[TensorRef, int],
    gradient: Reachability,
    structural: Reachability,
) -> Iterable[Concern]:
    live_outputs = 0
    for k in range(len(node.output_dtypes)):
        if live.get(TensorRef(node.name, k), 0):
            live_outputs |= 1 << k
    if not live_outputs:
        return
    step = step_of(node)
    for i, ref in enumerate(node.inputs):
        argument = step.argument(i)
        if argument is None or ref not in reached_with_gradient():
            continue
        passing, cutting = [], []
        for index, branch in enumerate(step.callees):
            carried = reach_of(gradient.summary(branch), argument) & live_outputs
            read = reach_of(structural.summary(branch), argument) & live_outputs
            if carried:
                passing.append(index)
            elif read:
                cutting.append(index)
        if passing and cutting:
            names = _variables_behind(program, body, ref)
            labels = _branch_labels(node, cutting)
            yield Concern(
                kind=ConcernKind.CUT_IN_BRANCH,
                op=node.name,
                op_type=node.op_type,
                function=body.name,
                location=node.location,
                variables=names,
                detail=f"it gets gradient in some branches, but the {labels} cuts it",
            )


def _branch_labels(node: Node, indices: list[int]) -> str:
    if step_of(node).kind is StepKind.IF:
        return "then-branch" if indices == [0] else "else-branch"
    return "branch " + ", ".join(str(i) for i in indices) + (" of the switch_case")


def _variables_behind(program: Program, body: Body, ref: TensorRef) -> tuple[str, ...]:
    """The variables whose source this tensor is, looking through reads and identities."""
    for _ in range(8):
        names = tuple(v.name for v in program.variables if v.source == ref)
        if names:
            return names
        producer = body.nodes.get(ref.node)
        if producer is None or producer.op_type not in _PASS_THROUGH or not producer.inputs:
            return ()
        ref = producer.inputs[0]
    return ()


def _forward(body: Body, seeds: Iterable[TensorRef], reach: Reachability) -> set[TensorRef]:
    """Tensors of `body` that the seeds reach, over every edge or only gradient-carrying ones."""
    consumers = reach.index.of(body).consumers
    seen = set(seeds)
    queue = deque(seen)
    while queue:
        ref = queue.popleft()
        for node, i in consumers.get(ref, ()):
            for k in reach.outputs_from(body, node, i):
                out = TensorRef(node.name, k)
                if out not in seen:
                    seen.add(out)
                    queue.append(out)
    return seen


def _concern(kind: ConcernKind, body: Body, node: Node) -> Concern:
    return Concern(
        kind=kind, op=node.name, op_type=node.op_type, function=body.name, location=node.location
    )


def regularizer_only(full: Analysis, data_only: Analysis) -> tuple[Concern, ...]:
    """Variables alive for the whole objective but dead for the data loss alone: only the
    regularizers or add_loss terms reach them, so training only decays them."""
    dead_for_data = {v.name for v in data_only.verdicts if v.dead}
    return tuple(
        Concern(
            kind=ConcernKind.TRAINED_ONLY_BY_REGULARIZER,
            op="",
            op_type="",
            location=verdict.location,
            variables=(verdict.name,),
            detail=_regularizer_detail(verdict.name),
        )
        for verdict in full.verdicts
        if verdict.status is Status.OK and verdict.name in dead_for_data
    )


def _regularizer_detail(name: str) -> str:
    parts = name.split("/")
    owner = f" of layer {parts[-2]}" if len(parts) >= 2 else ""
    return f"only model.losses (the regularizer{owner}, or an add_loss term) reach it"
