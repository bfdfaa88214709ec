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
)
from gradcheck_cli.analysis.walk_order import consumers_first
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.rules import Cut, input_cut
from gradcheck_cli.differentiability.structural_zeros import Surroundings, zero_rule_may_apply
from gradcheck_cli.graph.arrays import TensorMap, TensorSet
from gradcheck_cli.graph.model import CARRIES_GRADIENT, Body, Node, Program, TensorRef


class Reachability:
    """Masks of every tensor, per body, in one mode (`gradient=True`: only gradient edges)."""

    def __init__(
        self,
        program: Program,
        *,
        gradient: bool,
        ignore: frozenset[Reason] = frozenset(),
        index: ProgramIndex | None = None,
        like: Reachability | None = None,
    ) -> None:
        """`ignore`: cut reasons to treat as passing gradient ("what if no stop_gradient");
        `index`: the program's consumer maps and widths, shared with the other walkers;
        `like`: the gradient pass, whose masks this pass reads where they are the same. A
        function the gradient pass walked without losing a mask to a cut or a dtype (its
        `lossless`) has the same masks in every pass: every pass lies between that one and
        the structural pass, which then loses nothing either. With `ignore` only
        `Reason.STOP_GRADIENT`, so has a function that can hold no stop_gradient."""
        assert like is None or (like.gradient and not like.ignore)
        assert like is None or not gradient or ignore == {Reason.STOP_GRADIENT}
        self.program = program
        self.gradient = gradient
        self.ignore = ignore
        self.index = index or ProgramIndex(program)
        self._like = like
        self._summaries: dict[str, list[int]] = {}
        self._masks: dict[str, TensorMap] = {}
        self._in_progress: set[str] = set()
        self._steps: dict[tuple[Step, int], list[Summary]] = {}
        # Functions whose masks in this pass lost nothing to a cut or a dtype (gradient pass).
        self.lossless: set[str] = set()
        # Forward walks by body and seeds (`forward_reached`).
        self.forward: dict[tuple[str, tuple[TensorRef, ...]], TensorSet] = {}

    # -- public -------------------------------------------------------------------------------

    def top_masks(self) -> TensorMap:
        """Masks of the top body's tensors: bit 0 set when the tensor reaches the loss."""
        key = "\0top"
        if key not in self._masks:
            self._masks[key], _ = self._propagate(self.program.top_body, {self.program.loss: 1})
        return self._masks[key]

    def body_masks(self, name: str) -> TensorMap:
        """Masks of a function body's tensors against its own rets."""
        if name not in self._masks:
            if self._like is not None and name in self._like.lossless:
                return self._like.body_masks(name)
            body = self.program.bodies[name]
            seeds: dict[TensorRef, int] = {}
            for k, ret in enumerate(body.rets):
                seeds[ret] = seeds.get(ret, 0) | (1 << k)
            self._in_progress.add(name)
            try:
                self._masks[name], lost = self._propagate(body, seeds)
            finally:
                self._in_progress.discard(name)
            if not lost and self.gradient and not self.ignore:
                self.lossless.add(name)
        return self._masks[name]

    def summary(self, name: str) -> Summary:
        """Per argument of function `name`, the mask of the rets it reaches."""
        if name not in self._summaries:
            if self._from_like(name):
                assert self._like is not None
                return self._like.summary(name)
            body = self.program.bodies.get(name)
            if body is None or name in self._in_progress:
                # A missing body (recorded as a note by the loader) or a recursive call:
                # assume every argument reaches every ret, so nothing is called dead for it.
                width = len(body.args) if body else 64
                return [EVERYTHING] * width
            self._callees_first(name)
            masks = self.body_masks(name)
            self._summaries[name] = [masks.get(TensorRef(arg, 0), 0) for arg in body.args]
            if name in self.lossless:
                # Every pass reads the summary of a lossless function and walks it no more:
                # its masks and index go (built again if an explanation walks into it).
                del self._masks[name]
                self.index.forget(name)
        return self._summaries[name]

    def _from_like(self, name: str) -> bool:
        """Whether this pass reads function `name`'s summary off the gradient pass (`like`)."""
        like = self._like
        return like is not None and (
            name in like.lossless or self.gradient and not self.index.may_stop_gradient(name)
        )

    def _callees_first(self, name: str) -> None:
        """Summarise the functions that function `name`'s walk may step into, each after the
        functions it runs, without recursion: the walk then finds their summaries made.

        Nested calls otherwise recurse a few frames per level, and a recursion that goes up
        and down across the edge of one of CPython's frame stack chunks maps and unmaps it
        each time (on 58,000 small functions: seconds of system time, moved by how deep the
        caller's stack happens to be). A function on a cycle of calls, and each of its
        callers, is left to the walk's recursion: its summary depends on which of its
        callers are being summarised (`_in_progress`)."""
        on_path = {name}
        cyclic: set[str] = set()
        stack = [(name, iter(self._callees(name)))]
        while stack:
            current, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                stack.pop()
                on_path.discard(current)
                if current in cyclic:
                    if stack:
                        cyclic.add(stack[-1][0])
                elif stack:  # `name` itself is summarised by the caller
                    self.summary(current)
                continue
            if callee in on_path or callee in self._in_progress:
                cyclic.add(current)
            elif (
                callee not in self._summaries
                and callee in self.program.bodies
                and not self._from_like(callee)
            ):
                on_path.add(callee)
                stack.append((callee, iter(self._callees(callee))))

    def _callees(self, name: str) -> list[str]:
        """The functions that function `name`'s walk in this pass may ask the summary of."""
        facts = self.index.of(self.program.bodies[name])
        plain = facts.plain
        found: dict[str, None] = {}
        n = plain.find(0)
        while n >= 0:
            step = facts.step(n)
            found.update(dict.fromkeys(step.callees))
            if step.kind is StepKind.LOOP and not self.gradient and step.condition:
                found[step.condition] = None
            n = plain.find(0, n + 1)
        return list(found)

    def step_masks(self, step: Step, width: int, out_masks: list[int]) -> Iterator[tuple[int, int]]:
        """(input index, mask) for every input of a control-flow node of `width` inputs that
        some live output reaches (its callees are summarised: `_callees_first`)."""
        summaries = self.step_summaries(step, width)
        return inputs_reaching(step, summaries, out_masks, gradient=self.gradient)

    def outputs_from(self, body: Body, node: Node, input_index: int) -> Sequence[int]:
        """The outputs of `node` that its input `input_index` reaches, in this pass's mode."""
        facts = self.index.of(body)
        width = facts.width(node)
        step = step_of(node)
        if step.kind is not StepKind.PLAIN:
            summaries = self.step_summaries(step, len(node.inputs))
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
        """The cut of each of `node`'s inputs."""
        facts = self.index.of(body)
        return self._cuts_of(body, facts, facts.arrays.ids[node.name])

    def node_cuts(self, body: Body, n: int) -> tuple[Cut | None, ...]:
        """The cut of each input of node number `n` of `body`."""
        return self._cuts_of(body, self.index.of(body), n)

    def _cuts_of(self, body: Body, facts: BodyIndex, n: int) -> tuple[Cut | None, ...]:
        """The cut of each input of node number `n`. Every pass asks for the same edges: each
        node is judged once, for all of them."""
        cuts = facts.input_cuts[n]
        if cuts is None:
            arrays = facts.arrays
            carries = facts.carries
            inputs = arrays.input_tensors[arrays.input_start[n] : arrays.input_start[n + 1]]
            if facts.dtype_judged[n] and all(carries[t] for t in inputs):
                facts.input_cuts[n] = cuts = uncut(len(inputs))
                return cuts
            # A node no structural-zero rule can judge is judged by what it is alone: nodes of
            # one kind share their cuts.
            flat = arrays.flat
            kind = None
            if n not in flat.gradient_op_types and not zero_rule_may_apply(flat, n):
                kind = (flat.tables, *flat.kind(n), *flat.input_dtypes(n))
                cuts = self.index.cuts_by_kind.get(kind)
            if cuts is None:
                node = arrays.node(n)
                around = self.surroundings(body)
                custom = self.program.custom_gradients
                cuts = tuple(
                    input_cut(node, i, body.input_dtype(ref), custom, around)
                    for i, ref in enumerate(node.inputs)
                )
                # Most nodes pass gradient to every input: they share one tuple of Nones.
                if not any(cuts):
                    cuts = uncut(len(cuts))
                if kind is not None:
                    self.index.cuts_by_kind[kind] = cuts
            facts.input_cuts[n] = cuts
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

    def step_summaries(self, step: Step, width: int) -> list[Summary]:
        """The summaries of what a control-flow node of `width` inputs runs, over its own
        inputs and outputs."""
        key = (step, width)
        if key in self._steps:
            return self._steps[key]
        summaries = callee_summaries(step, self.summary, width, gradient=self.gradient)
        # A callee still being summarised (recursion) stands in with a guess: do not keep it.
        if step.kind is StepKind.LOOP and self._in_progress.isdisjoint(
            (*step.callees, step.condition)
        ):
            self._steps[key] = summaries
        return summaries

    # -- internals ----------------------------------------------------------------------------

    def _propagate(self, body: Body, seeds: dict[TensorRef, int]) -> tuple[TensorMap, bool]:
        """The masks of `body`'s tensors from the seeds', and whether some mask was lost on
        the way (to a cut, a dtype, or a step whose masks may differ between passes)."""
        facts = self.index.of(body)
        arrays = facts.arrays
        masks = [0] * arrays.tensor_count
        for ref, bits in seeds.items():
            t = arrays.tensor(ref)
            if t is not None:
                masks[t] |= bits
        key = frozenset(seeds)
        if key not in facts.orders:
            facts.orders[key] = consumers_first(facts, seeds)
        plan = facts.orders[key]
        lost = self._visit(body, facts, plan, masks)
        if plan.cyclic:
            lost = True
            # TF1 while loops (NextIteration) form cycles: iterate until nothing grows.
            planned = set(plan)
            pending = deque(plan)
            queued = set(plan)
            while pending:
                n = pending.popleft()
                queued.discard(n)
                grown: list[int] = []
                self._visit(body, facts, (n,), masks, grown)
                for producer in grown:
                    if producer not in queued and producer in planned:
                        queued.add(producer)
                        pending.append(producer)
        return TensorMap(arrays, masks), lost

    def _visit(
        self,
        body: Body,
        facts: BodyIndex,
        plan: Iterable[int],
        masks: list[int],
        grown: list[int] | None = None,
    ) -> bool:
        """Carry each planned node's output masks to its inputs; the producers whose masks grew
        go to `grown`. True if some mask was lost (see `_propagate`). Runs for every ancestor
        of the loss in every pass, so ordinary ops take a short way over the body's arrays."""
        arrays = facts.arrays
        offsets, starts = arrays.offsets, arrays.input_start
        tensors, producers = arrays.input_tensors, arrays.input_nodes
        plain, cuts = facts.plain, facts.input_cuts
        gradient, ignore = self.gradient, self.ignore
        carries = facts.carries if gradient else b""
        by_dtype = facts.dtype_judged if gradient else b""
        # Nodes whose every input gets every output's mask, in this pass: most of them.
        passing = facts.passing if gradient else plain
        lossless = self.lossless
        lost = False
        for n in plan:
            first, stop = offsets[n], offsets[n + 1]
            if stop - first == 1:
                everything = masks[first]
                if not everything:
                    continue
            else:
                everything = 0
                for t in range(first, stop):
                    everything |= masks[t]
                if not everything:
                    continue
            start, end = starts[n], starts[n + 1]
            # Each input gets `mask`, or its own of `edge_masks` (control flow), unless the
            # cut rules cut it (`judged`). A passing node's inputs each get every mask.
            judged: tuple[Cut | None, ...] | None = None
            edge_masks: list[int] | None = None
            mask = everything
            if passing[n]:
                pass
            elif not plain[n]:
                edge_masks = [0] * (end - start)
                step = facts.step(n)
                for i, reached in self.step_masks(step, end - start, masks[first:stop]):
                    if i < end - start:
                        edge_masks[i] |= reached
                # A call loses nothing its callee does not; other steps differ between passes.
                if not lost:
                    lost = step.kind is not StepKind.CALL or not lossless.issuperset(step.callees)
            elif gradient:
                mask = 0
                for t in range(first, stop):
                    if carries[t]:
                        mask |= masks[t]
                if mask != everything:
                    lost = True
                    if not mask:
                        continue
                judged = cuts[n]
                if judged is None and by_dtype[n]:
                    # Most nodes: an op only the dtype rule judges, every input of a dtype
                    # that carries gradient (`_cuts_of`'s short way, without the call).
                    for edge in range(start, end):
                        if not carries[tensors[edge]]:
                            judged = self._cuts_of(body, facts, n)
                            break
                elif judged is None:
                    judged = self._cuts_of(body, facts, n)
                if judged is not None and judged is _UNCUT.get(end - start):
                    judged = None
            for edge in range(start, end):
                if edge_masks is not None:
                    mask = edge_masks[edge - start]
                elif judged is not None:
                    cut = judged[edge - start]
                    if cut is not None and cut.reason not in ignore:
                        lost = True
                        continue
                t = tensors[edge]
                old = masks[t]
                if old | mask != old:
                    masks[t] = old | mask
                    if grown is not None and producers[edge] >= 0:
                        grown.append(producers[edge])
        return lost


def forward_reached(body: Body, seeds: Iterable[TensorRef], reach: Reachability) -> TensorSet:
    """Tensors of `body` that the seeds reach, over every edge or only gradient-carrying ones;
    walked once per body and seeds in each pass (the cuts and the concerns ask alike)."""
    key = (body.name, tuple(seeds))
    if key not in reach.forward:
        reach.forward[key] = _forward(body, key[1], reach)
    return reach.forward[key]


def _forward(body: Body, seeds: Iterable[TensorRef], reach: Reachability) -> TensorSet:
    facts = reach.index.of(body)
    arrays = facts.arrays
    offsets, starts = arrays.offsets, arrays.input_start
    reader_start, reader_edges, edge_nodes = (
        arrays.reader_start,
        arrays.reader_edges,
        arrays.edge_nodes,
    )
    plain, cuts = facts.plain, facts.input_cuts
    gradient, ignore = reach.gradient, reach.ignore
    carries = facts.carries if gradient else b""
    by_dtype = facts.dtype_judged if gradient else b""
    seen = bytearray(arrays.tensor_count)
    unnumbered = set()
    queue: deque[int] = deque()
    for ref in seeds:
        t = arrays.tensor(ref)
        if t is None:
            unnumbered.add(ref)
        elif not seen[t]:
            seen[t] = 1
            queue.append(t)
    while queue:
        t = queue.popleft()
        for edge in reader_edges[reader_start[t] : reader_start[t + 1]]:
            n = edge_nodes[edge]
            first, stop = offsets[n], offsets[n + 1]
            outputs: Iterable[int]
            if not plain[n]:
                node = arrays.node(n)
                outputs = [first + k for k in reach.outputs_from(body, node, edge - starts[n])]
            else:
                # A node only the dtype rule judges passes gradient on from a tensor that
                # carries it (`_cuts_of`'s short way).
                if gradient and not (by_dtype[n] and carries[t]):
                    judged = cuts[n]
                    if judged is None:
                        judged = reach._cuts_of(body, facts, n)
                    cut = judged[edge - starts[n]]
                    if cut is not None and cut.reason not in ignore:
                        continue
                if stop - first == 1:  # most ops: one output, stepped to without a list
                    if not seen[first] and (not gradient or carries[first]):
                        seen[first] = 1
                        queue.append(first)
                    continue
                outputs = [u for u in range(first, stop) if not gradient or carries[u]]
            for u in outputs:
                if not seen[u]:
                    seen[u] = 1
                    queue.append(u)
    return TensorSet(arrays, seen, frozenset(unnumbered))


_UNCUT: dict[int, tuple[Cut | None, ...]] = {}
"""(None,) * n: the cuts of a node whose every input gets gradient, one tuple per n."""


def uncut(count: int) -> tuple[Cut | None, ...]:
    """The cuts of a node that passes gradient to each of its `count` inputs: one tuple of
    Nones shared by every such node."""
    cuts = _UNCUT.get(count)
    if cuts is None:
        cuts = _UNCUT[count] = (None,) * count
    return cuts


def _carries_gradient(node: Node, index: int) -> bool:
    """Whether output `index` of `node` can carry gradient; an undeclared one is given the
    benefit of the doubt."""
    dtypes = node.output_dtypes
    return index >= len(dtypes) or dtypes[index] in CARRIES_GRADIENT
