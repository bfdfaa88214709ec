"""Backward reachability from the loss, over every data edge or only over gradient-carrying ones.

Each body is walked once per mode: a tensor's mask has bit k set when it reaches ret k of its
body (for the top body, the loss). A call site asks its callee's summary, the masks of the
callee's arguments, computed once per callee and reused at every call site.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence

from gradcheck_cli.analysis.control_flow import (
    EVERYTHING,
    BodyIndex,
    ProgramIndex,
    Step,
    StepKind,
    Summary,
    callee_summaries,
    inputs_reaching,
    outputs_reached,
    set_bits,
    step_of,
    union,
)
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.rules import Cut, input_cut
from gradcheck_cli.differentiability.structural_zeros import Surroundings
from gradcheck_cli.graph.model import (
    CARRIES_GRADIENT,
    Body,
    Node,
    Program,
    TensorRef,
)


class Reachability:
    """Masks of every tensor, per body, in one mode (`gradient=True`: only gradient edges)."""

    def __init__(
        self,
        program: Program,
        *,
        gradient: bool,
        ignore: frozenset[Reason] = frozenset(),
        index: ProgramIndex | None = None,
    ) -> None:
        """`ignore`: cut reasons to treat as passing gradient ("what if no stop_gradient");
        `index`: the program's consumer maps and widths, shared with the other walkers."""
        self.program = program
        self.gradient = gradient
        self.ignore = ignore
        self.index = index or ProgramIndex(program)
        self._summaries: dict[str, list[int]] = {}
        self._masks: dict[str, dict[TensorRef, int]] = {}
        self._in_progress: set[str] = set()
        self._steps: dict[tuple[Step, int], list[Summary]] = {}

    # -- public -------------------------------------------------------------------------------

    def top_masks(self) -> dict[TensorRef, int]:
        """Masks of the top body's tensors: bit 0 set when the tensor reaches the loss."""
        key = "\0top"
        if key not in self._masks:
            self._masks[key] = self._propagate(self.program.top_body, {self.program.loss: 1})
        return self._masks[key]

    def body_masks(self, name: str) -> dict[TensorRef, int]:
        """Masks of a function body's tensors against its own rets."""
        if name not in self._masks:
            body = self.program.bodies[name]
            seeds: dict[TensorRef, int] = {}
            for k, ret in enumerate(body.rets):
                seeds[ret] = seeds.get(ret, 0) | (1 << k)
            self._in_progress.add(name)
            try:
                self._masks[name] = self._propagate(body, seeds)
            finally:
                self._in_progress.discard(name)
        return self._masks[name]

    def summary(self, name: str) -> Summary:
        """Per argument of function `name`, the mask of the rets it reaches."""
        if name not in self._summaries:
            body = self.program.bodies.get(name)
            if body is None or name in self._in_progress:
                # A missing body (recorded as a note by the loader) or a recursive call:
                # assume every argument reaches every ret, so nothing is called dead for it.
                width = len(body.args) if body else 64
                return [EVERYTHING] * width
            masks = self.body_masks(name)
            self._summaries[name] = [masks.get(TensorRef(arg, 0), 0) for arg in body.args]
        return self._summaries[name]

    def input_masks(
        self, body: Body, node: Node, out_masks: list[int]
    ) -> Iterator[tuple[int, int]]:
        """(input index, mask) for every input of `node` that some live output reaches."""
        step = step_of(node)
        if step.kind is not StepKind.PLAIN:
            summaries = self.step_summaries(step, node)
            yield from inputs_reaching(step, summaries, out_masks, gradient=self.gradient)
        elif self.gradient:
            yield from self._plain_gradient(body, node, out_masks)
        else:
            everything = union(out_masks)
            if everything:
                yield from ((i, everything) for i in range(len(node.inputs)))

    def outputs_from(self, body: Body, node: Node, input_index: int) -> Sequence[int]:
        """The outputs of `node` that its input `input_index` reaches, in this pass's mode."""
        facts = self.index.of(body)
        width = facts.width(node)
        step = step_of(node)
        if step.kind is not StepKind.PLAIN:
            summaries = self.step_summaries(step, node)
            mask = outputs_reached(step, summaries, input_index, gradient=self.gradient)
            return set_bits(mask, width)
        if not self.gradient:
            return range(width)
        if not self.passes(body, node, input_index):
            return ()
        return [k for k in range(width) if _carries_gradient(node, k)]

    def passes(self, body: Body, node: Node, input_index: int) -> bool:
        """True if gradient from an ordinary op's outputs reaches its input `input_index`."""
        cut = self.cut(body, node, input_index)
        return cut is None or cut.reason in self.ignore

    def cut(self, body: Body, node: Node, input_index: int) -> Cut | None:
        """Why gradient from an ordinary op's outputs does not reach input `input_index`; None
        if it does."""
        return self._cuts(body, node)[input_index]

    def _cuts(self, body: Body, node: Node) -> tuple[Cut | None, ...]:
        """The cut of each of `node`'s inputs. Every pass asks for the same edges: each node is
        judged once, for all of them."""
        known = self.index.of(body).input_cuts
        cuts = known.get(node.name)
        if cuts is None:
            around = self.surroundings(body)
            custom = self.program.custom_gradients
            cuts = tuple(
                input_cut(node, i, body.input_dtype(ref), custom, around)
                for i, ref in enumerate(node.inputs)
            )
            # Most nodes pass gradient to every input: they share one tuple of Nones.
            known[node.name] = cuts = _UNCUT.setdefault(cuts, cuts) if not any(cuts) else cuts
        return cuts

    def surroundings(self, body: Body) -> Surroundings:
        """What the cut rules may read around a node of `body`: constants, readers, shapes."""
        facts = self.index.of(body)
        if facts.surroundings is None:
            shapes = {}
            if body is self.program.top_body:
                for variable in self.program.variables:
                    if variable.source is not None and variable.shape is not None:
                        shapes[variable.source] = variable.shape
            facts.surroundings = Surroundings(
                producers=body.nodes,
                consumers=facts.consumers,
                rets=frozenset(body.rets),
                shapes=shapes,
            )
        return facts.surroundings

    def step_summaries(self, step: Step, node: Node) -> list[Summary]:
        """The summaries of what a control-flow node runs, over its own inputs and outputs."""
        key = (step, len(node.inputs))
        if key in self._steps:
            return self._steps[key]
        summaries = callee_summaries(step, self.summary, len(node.inputs), gradient=self.gradient)
        # A callee still being summarised (recursion) stands in with a guess: do not keep it.
        if step.kind is StepKind.LOOP and self._in_progress.isdisjoint(
            (*step.callees, step.condition)
        ):
            self._steps[key] = summaries
        return summaries

    # -- internals ----------------------------------------------------------------------------

    def _plain_gradient(
        self, body: Body, node: Node, out_masks: list[int]
    ) -> list[tuple[int, int]]:
        """(input index, mask) for the inputs of an ordinary op that gradient reaches."""
        live = _live(node, out_masks)
        if not live:
            return []
        ignore = self.ignore
        return [
            (i, live)
            for i, cut in enumerate(self._cuts(body, node))
            if cut is None or cut.reason in ignore
        ]

    def _propagate(self, body: Body, seeds: dict[TensorRef, int]) -> dict[TensorRef, int]:
        masks: dict[TensorRef, int] = {}
        for ref, bits in seeds.items():
            masks[ref] = masks.get(ref, 0) | bits
        facts = self.index.of(body)
        key = frozenset(seeds)
        if key not in facts.orders:
            facts.orders[key] = _plan(body, seeds, facts)
        plan = facts.orders[key]
        for step in plan:
            self._visit(body, step, masks, facts)
        if plan.cyclic:
            # TF1 while loops (NextIteration) form cycles: iterate until nothing grows.
            steps = {step[0].name: step for step in plan}
            pending = deque(plan)
            queued = set(steps)
            while pending:
                step = pending.popleft()
                queued.discard(step[0].name)
                grown: list[Node] = []
                self._visit(body, step, masks, facts, grown)
                for producer in grown:
                    if producer.name not in queued and producer.name in steps:
                        queued.add(producer.name)
                        pending.append(steps[producer.name])
        return masks

    def _visit(
        self,
        body: Body,
        step: _PlanStep,
        masks: dict[TensorRef, int],
        facts: BodyIndex,
        grown: list[Node] | None = None,
    ) -> None:
        """Carry a node's output masks to its inputs; the producers whose masks grew go to
        `grown`. Runs for every ancestor of the loss in every pass: plain ops take a short way."""
        node, width, plain = step
        name = node.name
        # A mask is keyed by TensorRef, equal to the plain tuple (name, index).
        if width == 1:
            only = masks.get((name, 0), 0)
            if not only:
                return
            out_masks = [only]
        else:
            out_masks = [masks.get((name, k), 0) for k in range(width)]
            if not any(out_masks):
                return
        inputs = node.inputs
        reaching: Iterable[tuple[int, int]]
        if not plain:
            reaching = self.input_masks(body, node, out_masks)
        elif self.gradient:
            reaching = self._plain_gradient(body, node, out_masks)
        else:
            everything = union(out_masks)
            reaching = [(i, everything) for i in range(len(inputs))]
        for i, mask in reaching:
            if i >= len(inputs):
                continue
            ref = inputs[i]
            old = masks.get(ref, 0)
            if old | mask != old:
                masks[ref] = old | mask
                if grown is not None and ref.node in body.nodes:
                    grown.append(body.nodes[ref.node])


def forward_reached(body: Body, seeds: Iterable[TensorRef], reach: Reachability) -> set[TensorRef]:
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


def _live(node: Node, out_masks: list[int]) -> int:
    """The union of the masks of the outputs that can carry gradient (by their dtype)."""
    live = 0
    for index, mask in enumerate(out_masks):
        if mask and _carries_gradient(node, index):
            live |= mask
    return live


def _carries_gradient(node: Node, index: int) -> bool:
    """Whether output `index` of `node` can carry gradient; an undeclared one is given the
    benefit of the doubt."""
    dtypes = node.output_dtypes
    return index >= len(dtypes) or dtypes[index] in CARRIES_GRADIENT


_UNCUT: dict[tuple[Cut | None, ...], tuple[Cut | None, ...]] = {}
"""(None,) * n: the cuts of a node whose every input gets gradient, one tuple per n."""

_PlanStep = tuple[Node, int, bool]
"""A node as every pass visits it: the node, how many outputs it has, whether it is plain."""


class _Order(list):  # type: ignore[type-arg]
    cyclic = False


def _plan(body: Body, seeds: dict[TensorRef, int], facts: BodyIndex) -> _Order:
    """The ancestors of the seeds in the order a backward pass visits them, with what each
    visit needs that does not change between passes."""
    order = _consumers_first(body, seeds)
    plan = _Order((node, facts.width(node), step_of(node).kind is StepKind.PLAIN) for node in order)
    plan.cyclic = order.cyclic
    return plan


def _consumers_first(body: Body, seeds: dict[TensorRef, int]) -> _Order:
    """Ancestors of the seeds, each after all of its consumers: a depth-first walk up the
    inputs, in reverse post-order. A cycle (a TF1 while loop) takes Kahn's algorithm instead,
    which places what it can and leaves the rest to iteration."""
    nodes = body.nodes
    done: set[str] = set()
    on_path: set[str] = set()
    post_order: list[Node] = []
    for seed in seeds:
        if seed.node not in nodes or seed.node in done:
            continue
        on_path.add(seed.node)
        path = [(nodes[seed.node], iter(nodes[seed.node].inputs))]
        while path:
            node, inputs = path[-1]
            for ref in inputs:
                producer = ref.node
                if producer in done or producer not in nodes:
                    continue
                if producer in on_path:
                    return _kahn(body, seeds)
                on_path.add(producer)
                path.append((nodes[producer], iter(nodes[producer].inputs)))
                break
            else:
                path.pop()
                on_path.discard(node.name)
                done.add(node.name)
                post_order.append(node)
    post_order.reverse()
    return _Order(post_order)


def _kahn(body: Body, seeds: dict[TensorRef, int]) -> _Order:
    """Ancestors of the seeds, each after all of its consumers (Kahn's algorithm); the nodes
    on a cycle go last, and the order is marked cyclic."""
    ancestors: set[str] = set()
    stack = [ref.node for ref in seeds if ref.node in body.nodes]
    while stack:
        name = stack.pop()
        if name in ancestors:
            continue
        ancestors.add(name)
        stack.extend(ref.node for ref in body.nodes[name].inputs if ref.node in body.nodes)
    pending_consumers = dict.fromkeys(ancestors, 0)
    for name in ancestors:
        for ref in body.nodes[name].inputs:
            if ref.node in pending_consumers:
                pending_consumers[ref.node] += 1
    ready = deque(name for name, count in pending_consumers.items() if count == 0)
    order = _Order()
    while ready:
        name = ready.popleft()
        node = body.nodes[name]
        order.append(node)
        for ref in node.inputs:
            if ref.node in pending_consumers:
                pending_consumers[ref.node] -= 1
                if pending_consumers[ref.node] == 0:
                    ready.append(ref.node)
    if len(order) < len(ancestors):
        order.cyclic = True
        placed = {n.name for n in order}
        order.extend(body.nodes[name] for name in sorted(ancestors - placed))
    return order
