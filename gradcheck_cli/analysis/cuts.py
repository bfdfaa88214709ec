"""The cuts on a dead variable's forward paths to the loss, nearest to the variable first."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from gradcheck_cli.analysis.control_flow import (
    StepKind,
    carried,
    condition_reads,
    set_bits,
    step_of,
)
from gradcheck_cli.analysis.reachability import Reachability
from gradcheck_cli.analysis.verdicts import Blocker, Edge, PathStep
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.rules import SHAPE_OPS
from gradcheck_cli.graph.model import Body, Node, Program, TensorRef


class CutFinder:
    """Walks forward from a variable over the edges that lie on some path to the loss."""

    def __init__(self, program: Program, structural: Reachability) -> None:
        self.program = program
        self.structural = structural
        self._inside: dict[tuple[str, frozenset[int]], list[Blocker]] = {}

    def cuts(self, source: TensorRef) -> list[Blocker]:
        """Every cut between `source` and the loss in the top body and the functions it calls."""
        return self.explain(source)[0]

    def explain(
        self, source: TensorRef
    ) -> tuple[list[Blocker], tuple[PathStep, ...], tuple[Edge, ...]]:
        """The cuts, one shortest path to the loss, and every top-level edge on the way."""
        body = self.program.top_body
        trace = _Trace()
        blockers = _dedupe(self._walk(body, [source], self.structural.top_masks(), trace))
        # A shape read (tf.shape, a reduction over an unknown rank) is worth naming only when
        # it is the variable's sole way to the loss.
        value_cuts = [b for b in blockers if b.op_type not in SHAPE_OPS] or blockers
        # Cuts in the loss function itself name no function; cuts in the functions it calls do.
        value_cuts = [
            replace(b, function=None) if b.function == body.name else b for b in value_cuts
        ]
        path = trace.path(body, source, self.program.loss)
        return value_cuts, path, tuple(sorted(trace.edges.values(), key=_edge_key))

    # -- internals ----------------------------------------------------------------------------

    def _inside_function(self, name: str, args: frozenset[int]) -> list[Blocker]:
        key = (name, args)
        if key not in self._inside:
            self._inside[key] = []  # guards against recursion
            body = self.program.bodies.get(name)
            if body is None:
                return []
            seeds = [TensorRef(body.args[i], 0) for i in sorted(args) if i < len(body.args)]
            self._inside[key] = self._walk(body, seeds, self.structural.body_masks(name))
        return self._inside[key]

    def _walk(
        self,
        body: Body,
        seeds: Iterable[TensorRef],
        masks: dict[TensorRef, int],
        trace: _Trace | None = None,
    ) -> list[Blocker]:
        consumers = self.structural.index.of(body).consumers
        found: list[Blocker] = []
        # In the seeds' order, not a set's: the order of the cuts must not depend on hashing.
        queue = deque(dict.fromkeys(seeds))
        seen: set[TensorRef] = set(queue)
        while queue:
            ref = queue.popleft()
            for node, i in consumers.get(ref, ()):
                reached = [
                    TensorRef(node.name, k)
                    for k in self.structural.outputs_from(body, node, i)
                    if masks.get(TensorRef(node.name, k))
                ]
                if not reached:
                    continue
                step = step_of(node)
                if step.kind is StepKind.PLAIN:
                    cut = self.structural.cut(body, node, i)
                    if cut is not None and not cut.inherited:
                        found.append(_blocker(body, node, cut.reason, cut.message))
                    if trace is not None:
                        trace.add(ref.node, node, cut.reason if cut and not cut.inherited else None)
                    if node.op_type in SHAPE_OPS:
                        continue  # only the shape goes on: what follows is shape arithmetic
                else:
                    before = len(found)
                    found.extend(self._step_cuts(body, node, i))
                    if trace is not None:
                        cut_here = found[before].reason if len(found) > before else None
                        trace.add(ref.node, node, cut_here)
                for out in reached:
                    if out not in seen:
                        seen.add(out)
                        queue.append(out)
        return found

    def _step_cuts(self, body: Body, node: Node, i: int) -> list[Blocker]:
        """The cuts met by input `i` of a control-flow node: at the node, or inside its callees."""
        step = step_of(node)
        argument = step.argument(i)
        if argument is None:
            what = "predicate of the cond" if step.kind is StepKind.IF else "branch index"
            message = f"it only decides the {what}, which carries no gradient"
            return [_blocker(body, node, Reason.INDEX_OR_SHAPE_INPUT, message)]
        found: list[Blocker] = []
        if step.kind is not StepKind.LOOP:
            for callee in step.callees:
                found.extend(self._inside_function(callee, frozenset({argument})))
            return found
        # Loop variables carry over to the next iteration: follow them to a fixpoint.
        width = len(node.inputs)
        held = 1 << argument
        if step.callees:
            held = carried(self.structural.summary(step.callees[0]), held, width)
            arguments = frozenset(set_bits(held, width))
            found.extend(self._inside_function(step.callees[0], arguments))
        if step.condition and condition_reads(self.structural.summary(step.condition), held, width):
            message = "the loop condition reads it; a loop condition carries no gradient"
            found.append(_blocker(body, node, Reason.INDEX_OR_SHAPE_INPUT, message))
        return found


class _Trace:
    """What a walk through the top body saw: its edges and the first way it reached each op."""

    def __init__(self) -> None:
        self.edges: dict[tuple[str, str], Edge] = {}
        self.parent: dict[str, str] = {}
        self.cut_at: dict[str, Reason] = {}

    def add(self, source: str, node: Node, cut: Reason | None) -> None:
        key = (source, node.name)
        if key not in self.edges or cut is not None:
            self.edges[key] = Edge(source, node.name, cut is not None)
        self.parent.setdefault(node.name, source)
        if cut is not None:
            self.cut_at.setdefault(node.name, cut)

    def path(self, body: Body, source: TensorRef, loss: TensorRef) -> tuple[PathStep, ...]:
        names = [loss.node]
        while (
            names[-1] != source.node and names[-1] in self.parent and len(names) <= len(body.nodes)
        ):
            names.append(self.parent[names[-1]])
        if names[-1] != source.node:
            return ()
        steps = []
        for name in reversed(names):
            node = body.nodes[name]
            steps.append(
                PathStep(node.name, node.op_type, None, node.location, self.cut_at.get(name), node)
            )
        return tuple(steps)


def _edge_key(edge: Edge) -> tuple[str, str]:
    return (edge.source, edge.target)


def _blocker(body: Body, node: Node, reason: Reason, message: str) -> Blocker:
    return Blocker(
        op=node.name,
        op_type=node.op_type,
        reason=reason,
        message=message,
        function=body.name,
        location=node.location,
    )


def _dedupe(blockers: list[Blocker]) -> list[Blocker]:
    seen: set[tuple[str | None, str, str]] = set()
    unique = []
    for blocker in blockers:
        key = (blocker.function, blocker.op, blocker.reason.value)
        if key not in seen:
            seen.add(key)
            unique.append(blocker)
    return unique
