"""Suspicious but not fatal: stop_gradients that do nothing, cuts in only one branch of a cond."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from gradcheck_cli.analysis.reachability import (
    CASE_OPS,
    IF_OPS,
    WHILE_OPS,
    Reachability,
    branches_of,
    callee_of,
)
from gradcheck_cli.analysis.verdicts import Analysis, Concern, ConcernKind, Status
from gradcheck_cli.differentiability.rules import STOP_GRADIENT_OPS, input_cut
from gradcheck_cli.graph.model import Body, Node, Program, TensorRef, is_trainable_dtype

_PASS_THROUGH = frozenset({"Identity", "ReadVariableOp", "Enter", "Switch"})


def find_concerns(
    program: Program, gradient: Reachability, structural: Reachability
) -> tuple[Concern, ...]:
    """One forward pass from the trainable variables, structurally and over gradient edges."""
    top = program.top_body
    sources = [v.source for v in program.variables if v.trainable and v.source is not None]
    reached = _forward(program, top, sources, structural)
    reached_with_gradient = _forward(program, top, sources, gradient)
    live = gradient.top_masks()
    concerns: list[Concern] = []
    consumed = _consumed(top)
    for node in top.nodes.values():
        if node.op_type in STOP_GRADIENT_OPS and node.inputs:
            concerns.extend(
                _stop_gradient_concern(top, node, consumed, reached, reached_with_gradient)
            )
        elif node.op_type in IF_OPS or node.op_type in CASE_OPS:
            concerns.extend(
                _branch_concerns(
                    program, top, node, reached_with_gradient, live, gradient, structural
                )
            )
    for body in program.bodies.values():
        if body is top:
            continue
        used = _consumed(body)
        for node in body.nodes.values():
            if node.op_type in STOP_GRADIENT_OPS and TensorRef(node.name, 0) not in used:
                concerns.append(_concern(ConcernKind.STOP_GRADIENT_UNUSED, body, node))
    return tuple(concerns)


def _stop_gradient_concern(
    body: Body,
    node: Node,
    consumed: set[TensorRef],
    reached: set[TensorRef],
    reached_with_gradient: set[TensorRef],
) -> Iterable[Concern]:
    if TensorRef(node.name, 0) not in consumed:
        yield _concern(ConcernKind.STOP_GRADIENT_UNUSED, body, node)
    elif node.inputs[0] not in reached:
        yield _concern(ConcernKind.STOP_GRADIENT_NO_EFFECT, body, node)
    elif node.inputs[0] not in reached_with_gradient:
        yield _concern(ConcernKind.STOP_GRADIENT_REDUNDANT, body, node)


def _branch_concerns(
    program: Program,
    body: Body,
    node: Node,
    reached_with_gradient: set[TensorRef],
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
    branches = branches_of(node)
    for i, ref in enumerate(node.inputs):
        if i == 0 or ref not in reached_with_gradient:
            continue
        passing, cutting = [], []
        for index, branch in enumerate(branches):
            carried = _bit(gradient.summary(branch), i - 1) & live_outputs
            read = _bit(structural.summary(branch), i - 1) & live_outputs
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
    if node.op_type in IF_OPS:
        return "then-branch" if indices == [0] else "else-branch"
    return "branch " + ", ".join(str(i) for i in indices) + (" of the switch_case")


def _bit(summary: list[int], index: int) -> int:
    return summary[index] if index < len(summary) else 0


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


def _consumed(body: Body) -> set[TensorRef]:
    used = set(body.rets)
    for node in body.nodes.values():
        used.update(node.inputs)
    return used


def _forward(
    program: Program, body: Body, seeds: Iterable[TensorRef], reach: Reachability
) -> set[TensorRef]:
    """Tensors of `body` that the seeds reach, over every edge or only gradient-carrying ones."""
    consumers: dict[TensorRef, list[tuple[Node, int]]] = {}
    for node in body.nodes.values():
        for i, ref in enumerate(node.inputs):
            consumers.setdefault(ref, []).append((node, i))
    seen = set(seeds)
    queue = deque(seen)
    while queue:
        ref = queue.popleft()
        for node, i in consumers.get(ref, ()):
            for k in _outputs_reached(program, body, node, i, reach):
                out = TensorRef(node.name, k)
                if out not in seen:
                    seen.add(out)
                    queue.append(out)
    return seen


def _outputs_reached(
    program: Program, body: Body, node: Node, i: int, reach: Reachability
) -> list[int]:
    width = len(node.output_dtypes)
    if node.op_type in WHILE_OPS:
        names = node.calls.get("body", ())
        summary = reach.summary(names[0]) if names else [-1] * width
        carried, grew = {i}, True
        while grew:
            grew = False
            for j in list(carried):
                for k in range(width):
                    if (_bit(summary, j) >> k) & 1 and k not in carried:
                        carried.add(k)
                        grew = True
        return sorted(k for k in carried if k < width)
    if node.op_type in IF_OPS or node.op_type in CASE_OPS:
        if i == 0:
            return [] if reach.gradient else list(range(width))
        mask = 0
        for branch in branches_of(node):
            mask |= _bit(reach.summary(branch), i - 1)
        return [k for k in range(width) if (mask >> k) & 1]
    callee = callee_of(node)
    if callee is not None:
        mask = _bit(reach.summary(callee), i)
        return [k for k in range(width) if (mask >> k) & 1]
    if reach.gradient:
        dtype = body.input_dtype(node.inputs[i])
        if input_cut(node, i, dtype, program.custom_gradients) is not None:
            return []
        return [k for k in range(width) if is_trainable_dtype(node.output_dtypes[k])]
    return list(range(width))


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
