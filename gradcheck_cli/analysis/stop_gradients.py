"""The shape of each top-level tf.stop_gradient that cuts a dead variable: what feeds it, and
whether it is the straight-through estimator `x + tf.stop_gradient(q(x) - x)`."""

from __future__ import annotations

from collections.abc import Iterable

from gradcheck_cli.analysis.verdicts import StopGradientShape, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import Body, Program, TensorRef

_PASS_THROUGH = frozenset({"Identity", "IdentityN"})
_SUBTRACTIONS = frozenset({"Sub"})
_ADDITIONS = frozenset({"AddV2", "Add"})


def stop_gradient_shapes(
    program: Program, verdicts: Iterable[VariableVerdict]
) -> dict[str, StopGradientShape]:
    """The shape of every top-body stop_gradient that cuts some dead variable, by op name."""
    body = program.top_body
    ops = {
        b.op
        for v in verdicts
        for b in v.blockers
        if b.reason is Reason.STOP_GRADIENT and b.function is None and b.op in body.nodes
    }
    if not ops:
        return {}
    consumers: dict[str, list[str]] = {op: [] for op in ops}
    flat = body.nodes
    numbers = {flat.ids[op]: op for op in ops}
    for edge, n in flat.edges_from(numbers):
        consumers[numbers[flat.input_producers[edge]]].append(flat.names[n])
    # Frozen variables (a teacher's batch-norm statistics) never train: only trainable ones count.
    by_source = {
        v.source.node: v.name for v in program.variables if v.source is not None and v.trainable
    }
    shapes = {}
    for op in sorted(ops):
        passed = _straight_through(body, op, consumers[op])
        shapes[op] = StopGradientShape(
            op,
            _upstream(body, op, by_source),
            straight_through=passed is not None,
            passed_to=_upstream(body, passed.node, by_source, itself=True) if passed else (),
        )
    return shapes


def _upstream(
    body: Body, op: str, by_source: dict[str, str], *, itself: bool = False
) -> tuple[str, ...]:
    """The variables whose value reaches `op`'s inputs (`itself`: or `op`) over any data edge."""
    seen = {op}
    stack = [op]
    while stack:
        node = body.nodes.get(stack.pop())
        if node is None:
            continue
        for ref in node.inputs:
            if ref.node not in seen:
                seen.add(ref.node)
                stack.append(ref.node)
    found = {by_source[name] for name in seen if name in by_source and (itself or name != op)}
    return tuple(name for name in by_source.values() if name in found)


def _straight_through(body: Body, op: str, consumers: list[str]) -> TensorRef | None:
    """x, if `op` is the stop_gradient of `x + tf.stop_gradient(q - x)`: the stopped value is
    a difference whose subtrahend is the other addend of the sum that consumes it."""
    stopped = body.nodes[op]
    if not stopped.inputs:
        return None
    difference = body.nodes.get(_through_identity(body, stopped.inputs[0]).node)
    if difference is None or difference.op_type not in _SUBTRACTIONS:
        return None
    if len(difference.inputs) != 2:
        return None
    subtrahend = _through_identity(body, difference.inputs[1])
    for name in consumers:
        total = body.nodes[name]
        if total.op_type not in _ADDITIONS or len(total.inputs) != 2:
            continue
        addends = [_through_identity(body, ref) for ref in total.inputs]
        if subtrahend in addends and TensorRef(op) in addends:
            return subtrahend
    return None


def _through_identity(body: Body, ref: TensorRef) -> TensorRef:
    """The tensor an Identity chain passes along."""
    seen = set()
    while ref.node not in seen:
        seen.add(ref.node)
        node = body.nodes.get(ref.node)
        if node is None or node.op_type not in _PASS_THROUGH or not node.inputs:
            return ref
        ref = node.inputs[ref.index if node.op_type == "IdentityN" else 0]
    return ref
