"""Suspicious but not fatal: stop_gradients that do nothing, cuts in only one branch of a cond."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable

from gradcheck_cli.analysis.control_flow import StepKind, reach_of, step_of
from gradcheck_cli.analysis.reachability import Reachability, forward_reached
from gradcheck_cli.analysis.verdicts import Analysis, Concern, ConcernKind, Status, VariableVerdict
from gradcheck_cli.differentiability.function_ops import CASE_OPS, IF_OPS
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.rules import STOP_GRADIENT_OPS, Cut
from gradcheck_cli.graph.arrays import TensorSet
from gradcheck_cli.graph.model import Body, Node, Program, TensorRef

_Reached = Callable[[], TensorSet]
"""The tensors a forward walk reaches, walked on the first call (only when a node asks)."""
_PASS_THROUGH = frozenset({"Identity", "ReadVariableOp", "Enter", "Switch"})


def find_concerns(
    program: Program,
    gradient: Reachability,
    structural: Reachability,
    verdicts: tuple[VariableVerdict, ...],
) -> tuple[Concern, ...]:
    """One forward pass from the trainable variables, structurally and over gradient edges,
    shared by every concern that asks for it (dead loss terms last)."""
    top = program.top_body
    index = structural.index
    sources = [v.source for v in program.variables if v.trainable and v.source is not None]
    # The forward passes cost a walk of the graph each: only taken when a node asks for them.
    reached = functools.cache(lambda: forward_reached(top, sources, structural))
    reached_with_gradient = functools.cache(lambda: forward_reached(top, sources, gradient))
    live = gradient.top_masks()
    concerns: list[Concern] = []
    consumed = index.of(top).consumed
    for n in top.nodes.numbers_of_types(STOP_GRADIENT_OPS | IF_OPS | CASE_OPS):
        node = top.nodes.node(n)
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
        stops = body.nodes.numbers_of_types(STOP_GRADIENT_OPS)
        used = index.of(body).consumed if stops else frozenset()
        for n in stops:
            node = body.nodes.node(n)
            if TensorRef(node.name, 0) not in used:
                concerns.append(_concern(ConcernKind.STOP_GRADIENT_UNUSED, body, node))
    concerns.extend(_dead_loss_terms(program, gradient, verdicts, reached_with_gradient))
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


# The cuts that make a term of the loss train nothing by mistake (a stop_gradient is meant).
_TERM_CUTS = frozenset({Reason.NON_DIFFERENTIABLE_OP, Reason.INTEGER_DTYPE, Reason.ZERO_GRADIENT})
# Ops that carry a term's value on to the loss unchanged in kind: summed, averaged, reshaped,
# added to other terms, scaled. A term multiplied by a value of the model is a mask or a weight.
_CARRY = frozenset(
    {"Identity", "Cast", "Reshape", "ExpandDims", "Squeeze", "Mean", "Sum", "Neg"}
    | {"AddV2", "Add", "AddN", "Sub"}
)
_SCALE = frozenset({"Mul", "RealDiv", "Div", "DivNoNan"})
_DATA_INPUT_ONLY = frozenset({"Reshape", "ExpandDims", "Mean", "Sum"})


def _dead_loss_terms(
    program: Program,
    gradient: Reachability,
    verdicts: tuple[VariableVerdict, ...],
    reached: _Reached,
) -> list[Concern]:
    """Terms added to the loss that train nothing: a non-differentiable op (an argmax, a
    rounding, a comparison) that variables training through other paths feed with gradient,
    and whose value is then only scaled, summed or added on its way to the loss."""
    if not any(v.status is Status.OK for v in verdicts):
        return []
    blamed = {b.op for v in verdicts if v.dead for b in v.blockers}
    top = program.top_body
    facts = gradient.index.of(top)
    flat, plain, by_dtype = top.nodes, facts.plain, facts.dtype_judged
    found = []
    for n in range(len(flat)):
        # A node only the dtype rule judges cuts only inputs of a dtype without gradient:
        # an inherited cut, never a term's own.
        if not plain[n] or by_dtype[n] or flat.names[n] in blamed:
            continue
        cuts = gradient.node_cuts(top, n)
        if not any(_cuts_a_term(cut) for cut in cuts):
            continue
        node = flat.node(n)
        for i, cut in enumerate(cuts):
            if cut is None or not _cuts_a_term(cut):
                continue
            if node.inputs[i] not in reached():
                continue
            if _added_to_loss(program, gradient, node, reached()):
                found.append(
                    Concern(
                        kind=ConcernKind.DEAD_LOSS_TERM,
                        op=node.name,
                        op_type=node.op_type,
                        location=node.location,
                        detail=cut.message,
                    )
                )
            break  # one concern per op, whichever of its inputs the variables reach
    return found


def _cuts_a_term(cut: Cut | None) -> bool:
    """Whether `cut` makes the value after it a term that trains nothing: a cut of its own
    whose value still moves with its input (an argmax, a rounding, a Sign). A product with a
    zero is no such term: its value is zero too, whatever the input (a cross-entropy's
    `logits * labels` with `tf.zeros_like` labels), so it changes neither a weight nor the loss."""
    return (
        cut is not None and not cut.inherited and not cut.value_unused and cut.reason in _TERM_CUTS
    )


def _added_to_loss(program: Program, reach: Reachability, start: Node, reached: TensorSet) -> bool:
    """True if `start`'s value reaches the loss through ops of `_CARRY` and `_SCALE` only,
    scaled by nothing that the variables' gradient reaches."""
    top = program.top_body
    facts = reach.index.of(top)
    queue = deque(TensorRef(start.name, k) for k in range(facts.width(start)))
    seen = set(queue)
    while queue:
        ref = queue.popleft()
        if ref == program.loss:
            return True
        for node, i in facts.consumers.get(ref, ()):
            if node.op_type not in _CARRY and node.op_type not in _SCALE:
                continue
            if node.op_type in _DATA_INPUT_ONLY and i != 0:
                continue
            if node.op_type in _SCALE and any(
                other in reached for k, other in enumerate(node.inputs) if k != i
            ):
                continue
            out = TensorRef(node.name, 0)
            if out not in seen:
                seen.add(out)
                queue.append(out)
    return False


def _concern(kind: ConcernKind, body: Body, node: Node) -> Concern:
    return Concern(
        kind=kind, op=node.name, op_type=node.op_type, function=body.name, location=node.location
    )


def regularizer_only(
    full: Analysis, data_only: Analysis, tied: frozenset[str] = frozenset()
) -> tuple[Concern, ...]:
    """Variables alive for the whole objective but dead for the data loss alone: only the
    regularizers or add_loss terms reach them, so training only decays them. Not those in
    `tied` (`penalties.tied_to_trained`): a term moves them with what the data trains."""
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
        if verdict.status is Status.OK
        and verdict.name in dead_for_data
        and verdict.name not in tied
    )


def _regularizer_detail(name: str) -> str:
    parts = name.split("/")
    owner = f" of layer {parts[-2]}" if len(parts) >= 2 else ""
    return f"only model.losses (the regularizer{owner}, or an add_loss term) reach it"
