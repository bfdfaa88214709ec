"""What a forward walk through a body saw, for the explanations: its edges, the first way it
reached each op, the cuts it met and the functions it entered."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gradcheck_cli.analysis.verdicts import Blocker, Edge, PathStep
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.arrays import TensorSet
from gradcheck_cli.graph.model import Body, TensorRef


@dataclass(frozen=True)
class Entered:
    """A walk entering a function: op `source` feeds argument `argument` of the function that
    op `caller` runs in its `role`; `arguments` are every argument the walk inside starts from."""

    source: str
    caller: str
    function: str
    role: str
    argument: int
    arguments: frozenset[int]


class Trace:
    """What a walk through a body saw: its edges and the first way it reached each op."""

    def __init__(self) -> None:
        self.edges: dict[tuple[str, str], Edge] = {}
        self.parent: dict[str, str] = {}
        self.cut_at: dict[str, Reason] = {}
        # The cuts met inside the functions each control-flow node calls.
        self.inner: dict[str, list[Blocker]] = {}
        # The functions the walk entered, in the order it entered them.
        self.entered: list[Entered] = []

    def essential(self, source: str, loss: str) -> set[str] | None:
        """The ops whose cut lies on a path from `source` to `loss` that crosses the fewest
        cuts (None when the walk never reached the loss)."""
        forward: dict[str, list[tuple[str, int]]] = {}
        backward: dict[str, list[tuple[str, int]]] = {}
        for edge in self.edges.values():
            forward.setdefault(edge.source, []).append((edge.target, int(edge.cut)))
            backward.setdefault(edge.target, []).append((edge.source, int(edge.cut)))
        from_source = fewest_cuts(source, forward)
        to_loss = fewest_cuts(loss, backward)
        fewest = from_source.get(loss)
        if fewest is None:
            return None
        return {
            edge.target
            for edge in self.edges.values()
            if edge.cut
            and edge.source in from_source
            and edge.target in to_loss
            and from_source[edge.source] + 1 + to_loss[edge.target] == fewest
        }

    def add(self, source: str, target: str, cut: Reason | None) -> None:
        key = (source, target)
        if key not in self.edges or cut is not None:
            self.edges[key] = Edge(source, target, cut is not None)
        self.parent.setdefault(target, source)
        if cut is not None:
            self.cut_at.setdefault(target, cut)

    def path(
        self,
        body: Body,
        source: TensorRef,
        loss: TensorRef,
        trainable_reach: Callable[[], TensorSet],
        layer_of_scope: Callable[[], dict[str, str]],
    ) -> tuple[PathStep, ...]:
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
            reached = trainable_reach()
            steps.append(
                PathStep(
                    node.name,
                    node.op_type,
                    None,
                    node.location,
                    self.cut_at.get(name),
                    node,
                    untrained_inputs=tuple(ref not in reached for ref in node.inputs),
                    layer=layer_of_scope().get(node.name.rpartition("/")[0]),
                )
            )
        return tuple(steps)


def fewest_cuts(start: str, edges: dict[str, list[tuple[str, int]]]) -> dict[str, int]:
    """The fewest cuts crossed from `start` to each op: a breadth-first walk in which an edge
    costs 0 or 1 (a cut), so ops are met in the order of their cost."""
    cost = {start: 0}
    queue = deque([start])
    done: set[str] = set()
    while queue:
        name = queue.popleft()
        if name in done:
            continue
        done.add(name)
        for target, weight in edges.get(name, ()):
            reached = cost[name] + weight
            if reached < cost.get(target, reached + 1):
                cost[target] = reached
                if weight:
                    queue.append(target)
                else:
                    queue.appendleft(target)
    return cost
