"""The one place that knows TensorFlow's control-flow ops and how a walker steps through them.

A walker sees a control-flow node as a step: the functions it runs (`callees`), how its inputs
map onto their arguments, and a summary per callee (per argument, a bit mask of the rets it
reaches). Backward walkers map output masks onto inputs (`inputs_reaching`), forward walkers
map an input onto outputs (`outputs_reached`). A while loop is turned into one summary over its
loop variables (`loop_summary`), so every walker sees it as a plain call.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from gradcheck_cli.differentiability.function_ops import (
    CASE_OPS,
    IF_OPS,
    WHILE_OPS,
    runs_its_functions,
)
from gradcheck_cli.differentiability.rules import (
    STOP_GRADIENT_OPS,
    Cut,
    passes_trainable_inputs,
    passes_unless_a_factor_is_zero,
)
from gradcheck_cli.differentiability.structural_zeros import (
    Surroundings,
    products_with_a_zero_factor,
)
from gradcheck_cli.graph.arrays import BodyArrays, TensorSet
from gradcheck_cli.graph.flat_nodes import FlatNodes, Tables
from gradcheck_cli.graph.model import Body, Node, Program, TensorRef

EVERYTHING = -1
"""A mask with every bit set: what an unknown callee is assumed to reach."""

Summary = Sequence[int]
"""Per argument of a function, the bit mask of the rets it reaches."""


class StepKind(enum.Enum):
    """How a walker steps through a node."""

    PLAIN = "plain"  # an ordinary op: the differentiability rules decide each input
    CALL = "call"  # input i is argument i of the callee
    IF = "if"  # input 0 is the predicate; input i > 0 is argument i - 1 of both branches
    CASE = "case"  # input 0 is the branch index; input i > 0 is argument i - 1 of every branch
    LOOP = "loop"  # input j is loop variable j of the body and of the condition


@dataclass(frozen=True)
class Step:
    """What a node runs and how its inputs map onto the arguments of what it runs."""

    kind: StepKind
    callees: tuple[str, ...] = ()
    condition: str | None = None

    @property
    def selects(self) -> bool:
        """True when input 0 only picks which branch runs (a predicate or a branch index)."""
        return self.kind in (StepKind.IF, StepKind.CASE)

    def argument(self, input_index: int) -> int | None:
        """The callee argument input `input_index` becomes; None for the selecting input."""
        if not self.selects:
            return input_index
        return input_index - 1 if input_index > 0 else None

    def input_of(self, argument: int) -> int:
        """The node input that becomes callee argument `argument`."""
        return argument + 1 if self.selects else argument


_PLAIN = Step(StepKind.PLAIN)


def step_of(node: Node) -> Step:
    """How to step through `node`; the only test of control-flow op types in the analysis."""
    op = node.op_type
    if op in WHILE_OPS:
        condition = node.calls.get("cond", ())
        return Step(
            StepKind.LOOP,
            node.calls.get("body", ())[:1],
            condition[0] if condition else None,
        )
    if op in IF_OPS:
        branches = node.calls.get("then_branch", ()) + node.calls.get("else_branch", ())
        return Step(StepKind.IF, branches)
    if op in CASE_OPS:
        return Step(StepKind.CASE, node.calls.get("branches", ()))
    if runs_its_functions(node):
        return Step(StepKind.CALL, node.calls.get("f", ())[:1])
    return _PLAIN


def _plain(flat: FlatNodes) -> bytes:
    """Per node number, 1 for an ordinary op (`StepKind.PLAIN`). `step_of` reads only a
    node's op type and calls: a node that calls nothing is plain by its op type, and the few
    that call a function by their (op type, calls) pair, each pair asked once per model."""
    plain = bytearray(map(flat.op_table.each(_plain_op).__getitem__, flat.op_types))
    if any(flat.calls):
        known = _STEPS.setdefault(flat.tables, {})
        for n, number in enumerate(flat.calls):
            if number:
                plain[n] = _step(flat, n, known).kind is StepKind.PLAIN
    return bytes(plain)


def _step(flat: FlatNodes, n: int, known: dict[tuple[int, int], Step]) -> Step:
    """`step_of` node number `n`, by its (op type, calls) pair: `known` holds the steps of
    the pairs met before."""
    pair = (flat.op_types[n], flat.calls[n])
    step = known.get(pair)
    if step is None:
        op, calls = flat.op_table.values[pair[0]], flat.calls_table.values[pair[1]]
        step = known[pair] = step_of(Node("", op, calls=calls))
    return step


def _plain_op(op: str) -> bool:
    """Whether a node of op type `op` that calls nothing is an ordinary op."""
    return step_of(Node("", op)).kind is StepKind.PLAIN


_STEPS: WeakKeyDictionary[Tables, dict[tuple[int, int], Step]] = WeakKeyDictionary()
"""The steps of (op type, calls) pairs, by the tables that number them (the bodies of one
model share them)."""


def union(masks: Iterable[int]) -> int:
    result = 0
    for mask in masks:
        result |= mask
    return result


def reach_of(summary: Summary, argument: int) -> int:
    """The rets argument `argument` reaches; an argument the callee does not have reaches none."""
    return summary[argument] if 0 <= argument < len(summary) else 0


def set_bits(mask: int, width: int) -> list[int]:
    """The indices below `width` whose bit is set in `mask`."""
    # One step per set bit, not per index: loops and calls may be thousands of tensors wide.
    mask &= (1 << width) - 1
    bits = []
    while mask:
        low = mask & -mask
        bits.append(low.bit_length() - 1)
        mask ^= low
    return bits


def arguments_reaching(summary: Summary, out_masks: Sequence[int]) -> Iterator[tuple[int, int]]:
    """(argument, mask) for every argument of a callee whose rets carry some output mask."""
    for argument, reaches in enumerate(summary):
        mask = 0
        for out_index in set_bits(reaches, len(out_masks)):
            mask |= out_masks[out_index]
        if mask:
            yield argument, mask


def carried(body_summary: Summary, entering: int, width: int) -> int:
    """Loop variables holding something of the `entering` ones at the start of any iteration.

    The entering variables themselves hold it at the start of the first iteration; body ret k
    becomes loop variable k of the next iteration.
    """
    full = (1 << width) - 1
    held = entering & full
    pending = set_bits(held, width)
    while pending and held != full:
        j = pending.pop()
        grown = reach_of(body_summary, j) & full & ~held
        held |= grown
        pending.extend(set_bits(grown, width))
    return held


def loop_summary(body_summary: Summary, condition_summary: Summary | None, width: int) -> list[int]:
    """Per loop variable, the outputs of the loop it reaches: a summary of the loop as a call.

    An output is what the last body run returned, so a loop variable reaches output k only
    through at least one run of the body (TensorFlow's gradient of a loop variable the body
    overwrites is zero). With `condition_summary` given (data edges, not gradient), a loop
    variable the condition reads, in any iteration, decides how often the body runs and so
    shapes every output.
    """
    full = (1 << width) - 1
    summary = []
    reached: dict[int, int] = {}  # held -> its summary entry; often every j holds everything
    for j in range(width):
        held = carried(body_summary, 1 << j, width)
        if held not in reached:
            if condition_summary is not None and any(
                reach_of(condition_summary, k) for k in set_bits(held, width)
            ):
                reached[held] = full
            else:
                reached[held] = union(reach_of(body_summary, k) for k in set_bits(held, width))
        summary.append(reached[held] & full)
    return summary


def condition_reads(condition_summary: Summary, loop_variables: int, width: int) -> bool:
    """True if the loop condition reads any of the given loop variables."""
    return any(reach_of(condition_summary, k) for k in set_bits(loop_variables, width))


def callee_summaries(
    step: Step, summary: Callable[[str], Summary], width: int, *, gradient: bool
) -> list[Summary]:
    """One summary per function the step runs, over the node's inputs and outputs.

    `summary(name)` is a function's own summary; `width` the number of loop variables.
    """
    if step.kind is not StepKind.LOOP:
        return [summary(name) for name in step.callees]
    body = summary(step.callees[0]) if step.callees else [EVERYTHING] * width
    condition = None
    if not gradient:
        condition = summary(step.condition) if step.condition else []
    return [loop_summary(body, condition, width)]


def inputs_reaching(
    step: Step, summaries: Sequence[Summary], out_masks: Sequence[int], *, gradient: bool
) -> Iterator[tuple[int, int]]:
    """Backward through a control-flow step: (input index, mask) from the output masks."""
    if step.selects and not gradient:
        everything = union(out_masks)
        if everything:
            yield 0, everything  # the predicate or branch index decides every output
    for callee in summaries:
        for argument, mask in arguments_reaching(callee, out_masks):
            yield step.input_of(argument), mask


def outputs_reached(
    step: Step, summaries: Sequence[Summary], input_index: int, *, gradient: bool
) -> int:
    """Forward through a control-flow step: the mask of outputs input `input_index` reaches."""
    argument = step.argument(input_index)
    if argument is None:
        return 0 if gradient else EVERYTHING
    return union(reach_of(callee, argument) for callee in summaries)


class BodyIndex:
    """Facts about one body every walker reads: its flat arrays (who reads each tensor, how
    wide each op is), and what the walkers learn once for every pass."""

    def __init__(self, body: Body, extra: Iterable[TensorRef] = ()) -> None:
        """`extra`: tensors read from outside the body besides its rets (the loss)."""
        # Per node number, 1 for an ordinary op (no control flow: `StepKind.PLAIN`). It is
        # all that the facts learnt from the body's numbers read of its calls: bodies alike
        # but for the functions they call share those facts (`BodyArrays.structure`).
        self.plain = plain = _plain(body.nodes)
        self.arrays = arrays = BodyArrays(body, extra, calls_as=plain)
        self.consumers = arrays.readers()
        # Filled by the walkers, shared by every pass over the body: the differentiability
        # rules' verdict on each node's inputs (by node number), ancestor orders by their
        # seeds, and which tensors can carry gradient.
        self.input_cuts: list[tuple[Cut | None, ...] | None] = [None] * len(arrays)
        self.orders: dict[frozenset[TensorRef], Any] = {}  # reachability's plans
        self.surroundings: Surroundings | None = None
        self._carries: bytes | None = None
        self._dtype_judged: bytes | None = None
        self._passing: bytes | None = None
        self._consumed: TensorSet | None = None
        self._steps: dict[tuple[int, int], Step] | None = None

    def step(self, n: int) -> Step:
        """How to step through node number `n` (`step_of`, without making the node)."""
        if self._steps is None:
            self._steps = _STEPS.setdefault(self.arrays.flat.tables, {})
        return _step(self.arrays.flat, n, self._steps)

    @property
    def consumed(self) -> TensorSet:
        """The tensors some node reads or the body returns."""
        if self._consumed is None:
            self._consumed = self.arrays.read()
        return self._consumed

    def width(self, node: Node) -> int:
        """How many outputs of `node` exist: its declared ones and any that is read."""
        n = self.arrays.ids.get(node.name)
        return self.arrays.widths[n] if n is not None else len(node.output_dtypes)

    @property
    def dtype_judged(self) -> bytes:
        """Per node number, 1 if the cut rules pass gradient to each of its inputs whose dtype
        can carry it (`passes_trainable_inputs`): decided once per op type and signature, and
        for a product by whether a factor may be zero."""
        if self._dtype_judged is None:
            self._dtype_judged = self._learnt("dtype_judged", _dtype_judged)
        return self._dtype_judged

    @property
    def passing(self) -> bytes:
        """Per node number, 1 for an ordinary op that the dtype rule alone judges and whose
        every input and output can carry gradient: gradient from any output reaches every
        input, in every gradient pass. Found on the arrays, by the few tensors that cannot
        carry gradient."""
        if self._passing is None:
            self._passing = self._learnt("passing", _passing)
        return self._passing

    @property
    def carries(self) -> bytes:
        """Per tensor number, 1 if its dtype can carry gradient."""
        if self._carries is None:
            self._carries = self._learnt(
                "carries", lambda facts: bytes(facts.arrays.carries_gradient())
            )
        return self._carries

    def _learnt(self, fact: str, learn: Callable[[BodyIndex], bytes]) -> bytes:
        """`fact` of this body, learnt from its numbers alone: once for all the bodies that
        share them (`BodyArrays.structure`)."""
        memo = self.arrays.structure.memo
        value = memo.get(fact)
        if value is None:
            value = memo[fact] = learn(self)
        return value


def _dtype_judged(facts: BodyIndex) -> bytes:
    flat = facts.arrays.flat
    kinds = _DTYPE_KINDS.setdefault(flat.tables, {})
    for pair in set(zip(flat.op_types, flat.signatures)) - kinds.keys():
        op, dtypes = flat.op_table.values[pair[0]], flat.signature_table.values[pair[1]]
        node = Node("", op, output_dtypes=dtypes)
        kinds[pair] = (
            _PASSES
            if passes_trainable_inputs(node)
            else _UNLESS_A_ZERO
            if passes_unless_a_factor_is_zero(node)
            else _JUDGED_BY_RULES
        )
    # Per node its kind's code, then 1 for the kinds the dtype rule alone judges; a product
    # is judged so when no factor may be zero.
    codes = bytes(map(kinds.__getitem__, zip(flat.op_types, flat.signatures)))
    judged = bytearray(codes.translate(_JUDGED_WITHOUT_ZEROS))
    if _UNLESS_A_ZERO_CODE in codes:
        products = codes.translate(_PRODUCTS_BY_KIND)
        for n in products_with_a_zero_factor(flat, products):
            judged[n] = 0
    for n in flat.gradient_op_types:
        judged[n] = 0
    return bytes(judged)


def _passing(facts: BodyIndex) -> bytes:
    arrays, carries = facts.arrays, facts.carries
    passing = bytearray(map(operator.and_, facts.plain, facts.dtype_judged))
    passing = bytearray(map(operator.and_, passing, arrays.outputs_carry_gradient()))
    inputs = bytes(map(carries.__getitem__, arrays.input_tensors))
    edge = inputs.find(0)
    while edge >= 0:
        passing[arrays.edge_nodes[edge]] = 0
        edge = inputs.find(0, edge + 1)
    return bytes(passing)


# How the cut rules judge the nodes of an op type and signature (`BodyIndex.dtype_judged`).
_PASSES, _UNLESS_A_ZERO, _JUDGED_BY_RULES = range(3)
# `bytes.translate` tables: 1 for _PASSES and a product (unless a factor may be zero), 1 for
# a product.
_JUDGED_WITHOUT_ZEROS = bytes([1, 1, 0]) + bytes(253)
_PRODUCTS_BY_KIND = bytes([0, 1, 0]) + bytes(253)
_UNLESS_A_ZERO_CODE = bytes([_UNLESS_A_ZERO])

_DTYPE_KINDS: WeakKeyDictionary[Tables, dict[tuple[int, int], int]] = WeakKeyDictionary()
"""How the cut rules judge each (op type, signature) pair, by the tables that number them (the
bodies of one model share them)."""


def _stops(op: str) -> bool:
    return op in STOP_GRADIENT_OPS


class ProgramIndex:
    """A `BodyIndex` per body of a program, each built once on first use."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._bodies: dict[str, BodyIndex] = {}
        # The cut rules' verdict on the inputs of nodes that only their kind decides (no
        # gradient override, no structural-zero rule), by tables, kind and input dtypes.
        self.cuts_by_kind: dict[tuple[object, ...], tuple[Cut | None, ...]] = {}
        self._stopping: dict[str, bool] = {}  # `may_stop_gradient`, by function

    def may_stop_gradient(self, name: str) -> bool:
        """True if a cut in function `name`, or in a function it runs, may be a stop_gradient:
        an op of `STOP_GRADIENT_OPS`, or one with a gradient override. A pass that lets
        stop_gradients through differs from the gradient pass only in such functions.

        Callees are asked in name order, the first that may stop answering for the rest; a
        function met again on the way (a recursive call) is assumed to. Walked with a stack
        of its own: a deep call tree would recurse across CPython's frame stack chunks
        (`Reachability._callees_first`)."""
        found = self._stopping.get(name)
        if found is not None:
            return found
        if name not in self.program.bodies:
            return False  # summarised as reaching everything in every pass
        stack: list[tuple[str, Iterator[str]]] = []
        answer = self._open(name, stack)  # the answer of the function last asked
        while stack:
            current, callees = stack[-1]
            if answer:  # a callee may stop gradient: so may `current`
                self._stopping[current] = True
                stack.pop()
                continue
            callee = next(callees, None)
            if callee is None:  # no callee may: nor may `current`
                self._stopping[current] = answer = False
                stack.pop()
            elif callee in self._stopping:
                answer = self._stopping[callee]
            elif callee not in self.program.bodies:
                answer = False
            else:
                answer = self._open(callee, stack)
        return self._stopping[name]

    def _open(self, name: str, stack: list[tuple[str, Iterator[str]]]) -> bool:
        """Start `may_stop_gradient` of function `name`: True if its own ops may stop
        gradient; else False, and its callees go on the stack to be asked."""
        self._stopping[name] = True  # a recursive call: assume it may
        flat = self.program.bodies[name].nodes
        if (
            not isinstance(flat, FlatNodes)
            or flat.gradient_op_types
            or any(map(flat.op_table.each(_stops).__getitem__, set(flat.op_types)))
        ):
            return True
        stack.append((name, iter(sorted(flat.functions_named()))))
        return False

    def forget(self, name: str) -> None:
        """Let body `name`'s index go (built again if asked for)."""
        self._bodies.pop(name, None)

    def of(self, body: Body) -> BodyIndex:
        if body.name not in self._bodies:
            extra = (self.program.loss,) if body.name == self.program.top else ()
            self._bodies[body.name] = BodyIndex(body, extra)
        return self._bodies[body.name]
