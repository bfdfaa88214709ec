"""Backward reachability from the loss, over every data edge or only over gradient-carrying ones.

Each body is walked once per mode: a tensor's mask has bit k set when it reaches ret k of its
body (for the top body, the loss). A call site asks its callee's summary, the masks of the
callee's arguments, computed once per callee and reused at every call site.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.rules import input_cut
from gradcheck_cli.graph.model import Body, Node, Program, TensorRef, is_trainable_dtype

CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
IF_OPS = frozenset({"If", "StatelessIf"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
WHILE_OPS = frozenset({"While", "StatelessWhile"})


def callee_of(node: Node) -> str | None:
    """The function a call node runs (PartitionedCall's `f`, or a direct library call)."""
    called = node.calls.get("f")
    if called and (node.op_type in CALL_OPS or node.op_type == called[0]):
        return called[0]
    return None


def branches_of(node: Node) -> tuple[str, ...]:
    if node.op_type in IF_OPS:
        return node.calls.get("then_branch", ()) + node.calls.get("else_branch", ())
    if node.op_type in CASE_OPS:
        return node.calls.get("branches", ())
    return ()


def is_control_flow(node: Node) -> bool:
    return (
        callee_of(node) is not None
        or node.op_type in IF_OPS
        or node.op_type in CASE_OPS
        or node.op_type in WHILE_OPS
    )


class Reachability:
    """Masks of every tensor, per body, in one mode (`gradient=True`: only gradient edges)."""

    def __init__(
        self, program: Program, *, gradient: bool, ignore: frozenset[Reason] = frozenset()
    ) -> None:
        """`ignore`: cut reasons to treat as passing gradient ("what if no stop_gradient")."""
        self.program = program
        self.gradient = gradient
        self.ignore = ignore
        self._summaries: dict[str, list[int]] = {}
        self._masks: dict[str, dict[TensorRef, int]] = {}
        self._in_progress: set[str] = set()

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

    def summary(self, name: str) -> list[int]:
        """Per argument of function `name`, the mask of the rets it reaches."""
        if name not in self._summaries:
            body = self.program.bodies.get(name)
            if body is None or name in self._in_progress:
                # A missing body (recorded as a note by the loader) or a recursive call:
                # assume every argument reaches every ret, so nothing is called dead for it.
                width = len(body.args) if body else 64
                return [-1] * width
            masks = self.body_masks(name)
            self._summaries[name] = [masks.get(TensorRef(arg, 0), 0) for arg in body.args]
        return self._summaries[name]

    def input_masks(
        self, body: Body, node: Node, out_masks: list[int]
    ) -> Iterator[tuple[int, int]]:
        """(input index, mask) for every input of `node` that some live output reaches."""
        if self.gradient and not is_control_flow(node):
            yield from self._plain_gradient(body, node, out_masks)
        elif node.op_type in WHILE_OPS:
            yield from enumerate(self._while(node, out_masks))
        elif node.op_type in IF_OPS or node.op_type in CASE_OPS:
            everything = _union(out_masks)
            if not self.gradient and everything:
                yield 0, everything  # the predicate or branch index decides every output
            for branch in branches_of(node):
                yield from ((i + 1, m) for i, m in self._through(branch, out_masks))
        elif (callee := callee_of(node)) is not None:
            yield from self._through(callee, out_masks)
        else:
            everything = _union(out_masks)
            if everything:
                yield from ((i, everything) for i in range(len(node.inputs)))

    # -- internals ----------------------------------------------------------------------------

    def _plain_gradient(
        self, body: Body, node: Node, out_masks: list[int]
    ) -> Iterator[tuple[int, int]]:
        live = 0
        for index, mask in enumerate(out_masks):
            dtype = node.output_dtypes[index] if index < len(node.output_dtypes) else None
            if is_trainable_dtype(dtype):
                live |= mask
        if not live:
            return
        for i, ref in enumerate(node.inputs):
            dtype = body.input_dtype(ref)
            cut = input_cut(node, i, dtype, self.program.custom_gradients)
            if cut is None or cut.reason in self.ignore:
                yield i, live

    def _through(self, callee: str, out_masks: list[int]) -> Iterator[tuple[int, int]]:
        for arg_index, reaches in enumerate(self.summary(callee)):
            mask = 0
            for out_index, out_mask in enumerate(out_masks):
                if out_mask and (reaches >> out_index) & 1:
                    mask |= out_mask
            if mask:
                yield arg_index, mask

    def _while(self, node: Node, out_masks: list[int]) -> list[int]:
        body_names = node.calls.get("body", ())
        cond_names = node.calls.get("cond", ())
        n = len(node.inputs)
        summary = self.summary(body_names[0]) if body_names else [-1] * n
        # arrive[j]: what reaches the loss from loop variable j at the start of any iteration.
        arrive = [0] * n
        changed = True
        while changed:
            changed = False
            for j in range(n):
                reaches = summary[j] if j < len(summary) else -1
                mask = arrive[j]
                for k in range(n):
                    if (reaches >> k) & 1:
                        mask |= (out_masks[k] if k < len(out_masks) else 0) | arrive[k]
                if mask != arrive[j]:
                    arrive[j] = mask
                    changed = True
        if not self.gradient:
            # The loop condition decides how often the body runs, so it shapes every output.
            everything = _union(out_masks) | _union(arrive)
            cond_summary = self.summary(cond_names[0]) if cond_names else []
            for j, reaches in enumerate(cond_summary[:n]):
                if reaches:
                    arrive[j] |= everything
        return arrive

    def _propagate(self, body: Body, seeds: dict[TensorRef, int]) -> dict[TensorRef, int]:
        masks: dict[TensorRef, int] = {}
        for ref, bits in seeds.items():
            masks[ref] = masks.get(ref, 0) | bits
        order = _consumers_first(body, seeds)
        for node in order:
            self._visit(body, node, masks)
        if order.cyclic:
            # TF1 while loops (NextIteration) form cycles: iterate until nothing grows.
            pending = deque(order)
            queued = set(n.name for n in order)
            while pending:
                node = pending.popleft()
                queued.discard(node.name)
                for producer in self._visit(body, node, masks):
                    if producer.name not in queued:
                        queued.add(producer.name)
                        pending.append(producer)
        return masks

    def _visit(self, body: Body, node: Node, masks: dict[TensorRef, int]) -> list[Node]:
        out_masks = [masks.get(TensorRef(node.name, k), 0) for k in range(_width(node, masks))]
        if not any(out_masks):
            return []
        grown = []
        for i, mask in self.input_masks(body, node, out_masks):
            if i >= len(node.inputs):
                continue
            ref = node.inputs[i]
            old = masks.get(ref, 0)
            if old | mask != old:
                masks[ref] = old | mask
                producer = body.nodes.get(ref.node)
                if producer is not None:
                    grown.append(producer)
        return grown


def _width(node: Node, masks: dict[TensorRef, int]) -> int:
    width = len(node.output_dtypes)
    while TensorRef(node.name, width) in masks:
        width += 1
    return width


def _union(masks: list[int]) -> int:
    result = 0
    for mask in masks:
        result |= mask
    return result


class _Order(list):  # type: ignore[type-arg]
    cyclic = False


def _consumers_first(body: Body, seeds: dict[TensorRef, int]) -> _Order:
    """Ancestors of the seeds, each after all of its consumers (Kahn's algorithm)."""
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
