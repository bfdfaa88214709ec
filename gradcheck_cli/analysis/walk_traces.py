"""What a forward walk through a body saw, for the explanations: its edges, the first way it
reached each op, the cuts it met and the functions it entered."""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gradcheck_cli.analysis.verdicts import Blocker, Edge, PathStep
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.arrays import TensorSet
from gradcheck_cli.graph.flat_nodes import FlatNodes
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


_SPAN = 1 << 32
"""Edge keys: `source * _SPAN + target`, for node numbers below it (an array index is)."""


class Trace:
    """What a walk through a body saw: its edges and the first way it reached each op.

    Ops are the body's node numbers (an op outside the body, read by a malformed one, is
    numbered -1 - k), and an edge is one integer key: a walk over a million edges keeps a dict
    of ints, not an object per edge. Names are made only for what an explanation shows.

    A walk that draws no route (`routed=False`: inside a function) and sees more than
    `counted_past` edges only counts them from then on: its subgraph is too large to keep, and
    the keys alone take eight bytes an edge where the dict takes about seventy.
    """

    def __init__(
        self, nodes: FlatNodes, *, routed: bool = True, counted_past: int | None = None
    ) -> None:
        self._nodes = nodes
        self._counted_past = None if routed else counted_past
        self._counted: array[int] | None = None  # the keys, once only counted
        self._count: int | None = None
        self._outside: dict[str, int] = {}
        self._outside_names: list[str] = []
        # Edge key -> cut, in the order the walk first met each edge.
        self._edges: dict[int, bool] = {}
        self._cut_at: dict[int, Reason] = {}
        # The cuts met inside the functions each control-flow node calls, by its name.
        self.inner: dict[str, list[Blocker]] = {}
        # The functions the walk entered, in the order it entered them.
        self.entered: list[Entered] = []

    def __len__(self) -> int:
        """How many edges the walk saw."""
        if self._counted is None:
            return len(self._edges)
        if self._count is None:
            import numpy  # only for a walk of more edges than a subgraph keeps

            keys = numpy.array(self._counted, dtype=numpy.int64)
            keys.sort()  # distinct keys by sorting: a fifth of numpy.unique's hashing
            self._count = int(keys.size and 1 + numpy.count_nonzero(keys[1:] != keys[:-1]))
        return self._count

    @property
    def counted(self) -> bool:
        """True when the walk only counted its edges (see the class)."""
        return self._counted is not None

    def number(self, name: str) -> int:
        """The number of op `name`, of the body or from outside it."""
        n = self._nodes.ids.get(name)
        if n is not None:
            return n
        if name not in self._outside:
            self._outside[name] = -1 - len(self._outside_names)
            self._outside_names.append(name)
        return self._outside[name]

    def name(self, n: int) -> str:
        return self._nodes.names[n] if n >= 0 else self._outside_names[-1 - n]

    def add(self, source: int, target: int, cut: Reason | None) -> None:
        """The walk crossed the edge from op `source` to op `target`; `cut`: gradient cannot."""
        key = source * _SPAN + target
        if self._counted is not None:
            self._counted.append(key)
            self._count = None
            return
        if self._counted_past is not None and len(self._edges) >= self._counted_past:
            if key not in self._edges:
                self._counted = array("q", self._edges)
                self._counted.append(key)
                self._edges = {}
                return
        if cut is None:
            self._edges.setdefault(key, False)
        else:
            self._edges[key] = True
            self._cut_at.setdefault(target, cut)

    def edges(self) -> list[Edge]:
        """Every edge the walk saw, by name, in the order it first met them."""
        assert self._counted is None, "a walk that only counted its edges keeps none"
        name = self.name
        return [
            Edge(name(source), name(target), cut) for source, target, cut in self._numbered_edges()
        ]

    def essential(self, source: str, loss: str) -> set[str] | None:
        """The ops whose cut lies on a path from `source` to `loss` that crosses the fewest
        cuts (None when the walk never reached the loss)."""
        forward: dict[int, list[tuple[int, int]]] = {}
        backward: dict[int, list[tuple[int, int]]] = {}
        edges = list(self._numbered_edges())
        for start, end, cut in edges:
            forward.setdefault(start, []).append((end, int(cut)))
            backward.setdefault(end, []).append((start, int(cut)))
        from_source = fewest_cuts(self.number(source), forward)
        to_loss = fewest_cuts(self.number(loss), backward)
        fewest = from_source.get(self.number(loss))
        if fewest is None:
            return None
        return {
            self.name(end)
            for start, end, cut in edges
            if cut
            and start in from_source
            and end in to_loss
            and from_source[start] + 1 + to_loss[end] == fewest
        }

    def path(
        self,
        body: Body,
        source: TensorRef,
        loss: TensorRef,
        trainable_reach: Callable[[], TensorSet],
        layer_of_scope: Callable[[], dict[str, str]],
    ) -> tuple[PathStep, ...]:
        # The first way the walk reached each op: the first edge it met into the op.
        parent: dict[int, int] = {}
        for start, end, _ in self._numbered_edges():
            parent.setdefault(end, start)
        start, at = self.number(source.node), [self.number(loss.node)]
        while at[-1] != start and at[-1] in parent and len(at) <= len(body.nodes):
            at.append(parent[at[-1]])
        if at[-1] != start:
            return ()
        steps = []
        for n in reversed(at):
            node = body.nodes[self.name(n)]
            reached = trainable_reach()
            steps.append(
                PathStep(
                    node.name,
                    node.op_type,
                    None,
                    node.location,
                    self._cut_at.get(n),
                    node,
                    untrained_inputs=tuple(ref not in reached for ref in node.inputs),
                    layer=layer_of_scope().get(node.name.rpartition("/")[0]),
                )
            )
        return tuple(steps)

    def _numbered_edges(self) -> Iterator[tuple[int, int, bool]]:
        for key, cut in self._edges.items():
            source, target = divmod(key, _SPAN)
            yield source, target, cut


def fewest_cuts(start: int, edges: dict[int, list[tuple[int, int]]]) -> dict[int, int]:
    """The fewest cuts crossed from `start` to each op: a breadth-first walk in which an edge
    costs 0 or 1 (a cut), so ops are met in the order of their cost."""
    cost = {start: 0}
    queue = deque([start])
    done: set[int] = set()
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
