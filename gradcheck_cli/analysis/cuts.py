"""The cuts on a dead variable's forward paths to the loss, nearest to the variable first."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from gradcheck_cli.analysis.control_flow import (
    StepKind,
    carried,
    condition_reads,
    set_bits,
    step_of,
)
from gradcheck_cli.analysis.reachability import Reachability, forward_reached, uncut
from gradcheck_cli.analysis.verdicts import Blocker, Edge, NestedCall, PathStep, SubgraphOp
from gradcheck_cli.analysis.walk_traces import Entered, Trace
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.rules import SHAPE_OPS, output_dtype_cut
from gradcheck_cli.graph.arrays import TensorMap, TensorSet
from gradcheck_cli.graph.model import MISSED_OVERRIDE, Body, Node, Program, TensorRef


class Explanation(NamedTuple):
    """Why a variable gets no gradient: its essential cuts, one shortest path to the loss,
    every edge on the way (in the top graph and in the functions its control-flow ops run),
    those functions, the ops at the edges' ends, and the side cuts."""

    cuts: list[Blocker]
    route: tuple[PathStep, ...]
    edges: tuple[Edge, ...]
    nested: tuple[NestedCall, ...]
    ops: tuple[SubgraphOp, ...]
    side_cuts: list[Blocker]
    # How many edges the subgraph would hold when it holds none for being larger than
    # MAX_SUBGRAPH_EDGES; 0 when it is kept.
    left_out: int = 0


MAX_SUBGRAPH_EDGES = 10_000
"""A subgraph of more edges is not kept: Graphviz cannot lay it out in useful time, and keeping
it would cost a large graph's explanation more than the rest of its check."""


class CutFinder:
    """Walks forward from a variable over the edges that lie on some path to the loss."""

    def __init__(self, program: Program, structural: Reachability) -> None:
        self.program = program
        self.structural = structural
        self._inside: dict[tuple[str, frozenset[int]], list[Blocker]] = {}
        # What each walk inside a function saw, for the subgraph's nested functions.
        self._inside_traces: dict[tuple[str, frozenset[int]], Trace] = {}
        self._reached: TensorSet | None = None
        self._layers: dict[str, str] | None = None

    def _layer_of_scope(self) -> dict[str, str]:
        """The layer each call scope belongs to, read off the ops that first use its variables:
        Keras names a layer's variables by the layer (`net/dense/kernel`) and the ops of each
        call by the call (`net_1/dense_1/MatMul`). Computed once, when a route first asks."""
        if self._layers is None:
            body = self.program.top_body
            consumers = self.structural.index.of(body).consumers
            found: dict[str, set[str]] = {}
            for variable in self.program.variables:
                layer = variable.name.rpartition("/")[0]
                if variable.source is None or not layer:
                    continue
                for node in _first_users(variable.source, consumers):
                    scope = node.name.rpartition("/")[0]
                    if _calls(scope, layer):
                        found.setdefault(scope, set()).add(layer)
            self._layers = {s: next(iter(ls)) for s, ls in found.items() if len(ls) == 1}
        return self._layers

    def _trainable_reach(self) -> TensorSet:
        """The top body's tensors that some trainable variable's value reaches: walked once,
        when a route first asks."""
        if self._reached is None:
            sources = [
                v.source for v in self.program.variables if v.trainable and v.source is not None
            ]
            self._reached = forward_reached(self.program.top_body, sources, self.structural)
        return self._reached

    def cuts(self, source: TensorRef) -> list[Blocker]:
        """Every cut between `source` and the loss in the top body and the functions it calls."""
        return self.explain(source).cuts

    def explain(self, source: TensorRef) -> Explanation:
        """The essential cuts, one shortest path to the loss, the subgraph and the side cuts.

        The essential cuts are the ones on the paths to the loss that cross the fewest cuts:
        what the user must change for the variable to train (every cut of a serial chain). A
        cut on another path (a tf.nn.moments stop_gradient beside a normalization's main path)
        leaves the variable dead when removed: a side cut, told only on request.
        """
        body = self.program.top_body
        trace = Trace(self.structural.index.of(body).arrays.flat)
        blockers = _dedupe(self._walk(body, [source], self.structural.top_masks(), trace))
        # A shape read (tf.shape, a reduction over an unknown rank) is worth naming only when
        # it is the variable's sole way to the loss.
        value_cuts = [b for b in blockers if b.op_type not in SHAPE_OPS] or blockers
        # Cuts in the loss function itself name no function; cuts in the functions it calls do.
        value_cuts = [
            replace(b, function=None) if b.function == body.name else b for b in value_cuts
        ]
        path = trace.path(
            body, source, self.program.loss, self._trainable_reach, self._layer_of_scope
        )
        size = self._subgraph_size(trace)
        edges: tuple[Edge, ...] = ()
        nested: tuple[NestedCall, ...] = ()
        ops: tuple[SubgraphOp, ...] = ()
        left_out = size if size > MAX_SUBGRAPH_EDGES else 0
        if not left_out:
            nested_edges, nested = self._nested(body, trace)
            edges = tuple(sorted([*trace.edges(), *nested_edges], key=_edge_key))
            ops = self._ops(body, edges)
        essential = trace.essential(source.node, self.program.loss.node)
        if essential is None:
            return Explanation(value_cuts, path, edges, nested, ops, [], left_out)
        inside = {id(b) for name in essential for b in trace.inner.get(name, ())}
        on_path = [
            b for b in value_cuts if (b.function is None and b.op in essential) or id(b) in inside
        ]
        if not on_path:
            return Explanation(value_cuts, path, edges, nested, ops, [], left_out)
        side = [b for b in value_cuts if b not in on_path]
        return Explanation(on_path, path, edges, nested, ops, side, left_out)

    def _subgraph_size(self, trace: Trace) -> int:
        """About how many edges the subgraph of a walk holds: its own and those of the walks
        inside the functions it entered, each function's once."""
        size = len(trace)
        walked: set[tuple[str, frozenset[int]]] = set()
        pending = [trace]
        while pending:
            for entered in pending.pop().entered:
                key = (entered.function, entered.arguments)
                inner = self._inside_traces.get(key)
                if inner is not None and key not in walked:
                    walked.add(key)
                    size += len(inner)
                    pending.append(inner)
        return size

    # -- internals ----------------------------------------------------------------------------

    def _ops(self, top: Body, edges: Iterable[Edge]) -> tuple[SubgraphOp, ...]:
        ends = {
            end
            for edge in edges
            for end in ((edge.source_function, edge.source), (edge.target_function, edge.target))
        }
        ops = []
        for function, name in sorted(ends, key=lambda end: (end[0] or "", end[1])):
            body = top if function is None else self.program.bodies.get(function)
            n = None if body is None else body.nodes.ids.get(name)
            if body is not None and n is not None:  # read off the arrays: no node is made
                flat = body.nodes
                ops.append(SubgraphOp(name, flat.op_type(n), function, flat.locations.get(n)))
        return tuple(ops)

    def _nested(self, top: Body, trace: Trace) -> tuple[list[Edge], tuple[NestedCall, ...]]:
        """The edges inside the functions the walk entered, and into and out of them, with
        each function and the op that runs it; functions those functions run included."""
        edges: dict[tuple[str | None, str, str | None, str], Edge] = {}
        calls: dict[tuple[str, str | None, str], NestedCall] = {}

        def add(edge: Edge) -> None:
            key = (edge.source_function, edge.source, edge.target_function, edge.target)
            if key not in edges or edge.cut:
                edges[key] = edge

        walked: set[tuple[str, frozenset[int]]] = set()
        pending = [(top, trace)]
        while pending:
            body, seen = pending.pop()
            here = None if body is top else body.name
            for entered in seen.entered:
                callee = self.program.bodies.get(entered.function)
                inner = self._inside_traces.get((entered.function, entered.arguments))
                if callee is None or inner is None:
                    continue
                # The arguments the walk went on from, or that the function returns as they are.
                inner_edges = inner.edges()
                leading = {edge.source for edge in inner_edges} | {ret.node for ret in callee.rets}
                arguments = tuple(
                    (callee.args[i], i)
                    for i in sorted(entered.arguments)
                    if i < len(callee.args) and callee.args[i] in leading
                )
                if not arguments:
                    continue
                key = (entered.caller, here, entered.function)
                known = calls.get(key)
                merged = tuple(sorted({*arguments, *(known.arguments if known else ())}))
                calls[key] = NestedCall(
                    entered.caller, here, entered.function, entered.role, merged
                )
                if entered.argument < len(callee.args) and callee.args[entered.argument] in leading:
                    add(
                        Edge(
                            entered.source,
                            callee.args[entered.argument],
                            source_function=here,
                            target_function=entered.function,
                        )
                    )
                reached = {name for name, _ in arguments} | {
                    end for edge in inner_edges for end in (edge.source, edge.target)
                }
                for ret in callee.rets:
                    if ret.node in reached:
                        add(Edge(ret.node, entered.caller, False, entered.function, here))
                if (entered.function, entered.arguments) not in walked:
                    walked.add((entered.function, entered.arguments))
                    for edge in inner_edges:
                        add(Edge(edge.source, edge.target, edge.cut, callee.name, callee.name))
                    pending.append((callee, inner))
        ordered = sorted(
            calls.values(), key=lambda c: (c.caller_function or "", c.caller, c.function)
        )
        return list(edges.values()), tuple(ordered)

    def _inside_function(self, name: str, args: frozenset[int]) -> list[Blocker]:
        key = (name, args)
        if key not in self._inside:
            self._inside[key] = []  # guards against recursion
            body = self.program.bodies.get(name)
            if body is None:
                return []
            seeds = [TensorRef(body.args[i], 0) for i in sorted(args) if i < len(body.args)]
            flat = self.structural.index.of(body).arrays.flat
            trace = Trace(flat, routed=False, counted_past=MAX_SUBGRAPH_EDGES)
            self._inside[key] = self._walk(body, seeds, self.structural.body_masks(name), trace)
            self._inside_traces[key] = trace
        return self._inside[key]

    def _walk(
        self,
        body: Body,
        seeds: Iterable[TensorRef],
        masks: TensorMap,
        trace: Trace | None = None,
    ) -> list[Blocker]:
        """The cuts a forward walk from the seeds meets on its way to what `masks` marks,
        over the body's arrays: a node is made only where it is a cut or a control-flow step."""
        facts = self.structural.index.of(body)
        arrays, plain = facts.arrays, facts.plain
        flat, names = arrays.flat, arrays.flat.names
        offsets, starts, edge_nodes = arrays.offsets, arrays.input_start, arrays.edge_nodes
        reader_start, reader_edges = arrays.reader_start, arrays.reader_edges
        tensors, producers = arrays.input_tensors, arrays.tensor_producers()
        input_cuts, by_dtype, carries = facts.input_cuts, facts.dtype_judged, facts.carries
        passing = facts.passing
        values = masks.values
        shape_ops = {n for n, op in enumerate(flat.op_table.values) if op in SHAPE_OPS}
        found: list[Blocker] = []
        # In the seeds' order, not a set's: the order of the cuts must not depend on hashing.
        start_tensors = [t for ref in dict.fromkeys(seeds) if (t := arrays.tensor(ref)) is not None]
        queue = deque(start_tensors)
        seen = bytearray(arrays.tensor_count)
        for t in start_tensors:
            seen[t] = 1
        while queue:
            t = queue.popleft()
            source = producers[t]  # a node number, or the trace's for an op outside the body
            if source < 0 and trace is not None:
                source = trace.number(arrays.ref(t).node)
            for edge in reader_edges[reader_start[t] : reader_start[t + 1]]:
                n = edge_nodes[edge]
                i = edge - starts[n]
                first = offsets[n]
                if plain[n]:
                    # Structurally an ordinary op's input reaches every output.
                    if offsets[n + 1] - first == 1:  # most ops: one output
                        if not values[first]:
                            continue
                        reached = (first,)
                    else:
                        reached = [u for u in range(first, offsets[n + 1]) if values[u]]
                        if not reached:
                            continue
                    cut = None  # most ops (`passing`): no input of theirs is cut
                    if not passing[n]:
                        judged = input_cuts[n]
                        if judged is None:
                            start, stop = starts[n], starts[n + 1]
                            if by_dtype[n] and all(carries[tensors[e]] for e in range(start, stop)):
                                # `_cuts_of`'s short way, without the call; kept for the next walk.
                                judged = input_cuts[n] = uncut(stop - start)
                            else:
                                judged = self.structural.node_cuts(body, n)
                        cut = judged[i]
                        if cut is None and carries[t] and not any(carries[u] for u in reached):
                            # Gradient reaches the input from other outputs than the ones on
                            # the way to the loss, which cannot carry it (a top_k's indices).
                            node = flat.node(n)
                            cut = output_dtype_cut(node, [u - first for u in reached])
                        if cut is not None and not cut.inherited:
                            found.append(_blocker(body, flat.node(n), cut.reason, cut.message))
                    if trace is not None:
                        here = cut.reason if cut and not cut.inherited else None
                        trace.add(source, n, here)
                    if flat.op_types[n] in shape_ops:
                        continue  # only the shape goes on: what follows is shape arithmetic
                else:
                    node = flat.node(n)
                    outputs = self.structural.outputs_from(body, node, i)
                    reached = [first + k for k in outputs if values[first + k]]
                    if not reached:
                        continue
                    before = len(found)
                    source_name = names[source] if source >= 0 else arrays.ref(t).node
                    found.extend(self._step_cuts(body, node, i, source_name, trace))
                    if trace is not None:
                        cut_here = found[before].reason if len(found) > before else None
                        trace.add(source, n, cut_here)
                        trace.inner.setdefault(node.name, []).extend(found[before:])
                for u in reached:
                    if not seen[u]:
                        seen[u] = 1
                        queue.append(u)
        return found

    def _step_cuts(
        self, body: Body, node: Node, i: int, source: str, trace: Trace | None
    ) -> list[Blocker]:
        """The cuts met by input `i` of a control-flow node (fed by op `source`): at the node,
        or inside its callees."""
        step = step_of(node)
        argument = step.argument(i)
        if argument is None:
            what = "predicate of the cond" if step.kind is StepKind.IF else "branch index"
            message = f"it only decides the {what}, which carries no gradient"
            return [_blocker(body, node, Reason.INDEX_OR_SHAPE_INPUT, message)]
        found: list[Blocker] = []

        def enter(callee: str, arguments: frozenset[int]) -> None:
            found.extend(self._inside_function(callee, arguments))
            if trace is not None:
                role = next((r for r, names in node.calls.items() if callee in names), "f")
                trace.entered.append(Entered(source, node.name, callee, role, argument, arguments))

        if step.kind is not StepKind.LOOP:
            for callee in step.callees:
                enter(callee, frozenset({argument}))
            return found
        # Loop variables carry over to the next iteration: follow them to a fixpoint.
        width = len(node.inputs)
        held = 1 << argument
        if step.callees:
            held = carried(self.structural.summary(step.callees[0]), held, width)
            enter(step.callees[0], frozenset(set_bits(held, width)))
        if step.condition and condition_reads(self.structural.summary(step.condition), held, width):
            message = "the loop condition reads it; a loop condition carries no gradient"
            found.append(_blocker(body, node, Reason.INDEX_OR_SHAPE_INPUT, message))
        return found


class CalledLayers:
    """Which Keras layers the loss calls, read off the name scopes of the program's ops: a
    layer's variables are named by the layer (`net/dense/kernel`), the ops of each call by the
    call (`net_1/dense_1/MatMul`). A scope is a call of the layer it matches best: the most
    parts, then the most parts named exactly (`dense_1` is a call of a layer `dense_1` if there
    is one, else of `dense`). Collected once, when first asked."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._called: set[str] | None = None

    def called(self, variable: str) -> bool:
        """True if some op of the program lies in a call scope of `variable`'s layer, and no
        other layer has that name (a model cloned with `clone_model` keeps its layers' names:
        a scope of that name is then no evidence of which of the two was called)."""
        layer = variable.rpartition("/")[0]
        if not layer:
            return False
        if self._called is None:
            self._called = self._collect() - self._shared_layers()
        return layer in self._called

    def _shared_layers(self) -> set[str]:
        """Layers whose variables' names two variables share: `make_names_unique` told them
        apart as `kernel` and `kernel_1`."""
        names = {v.name for v in self.program.variables}
        shared = set()
        for name in names:
            base, underscore, count = name.rpartition("_")
            if underscore and count.isdigit() and base in names:
                shared.add(base.rpartition("/")[0])
        return shared

    def _collect(self) -> set[str]:
        layers = {v.name.rpartition("/")[0] for v in self.program.variables} - {""}
        scopes = {
            tuple(name.split("/")[:-1])
            for body in self.program.bodies.values()
            for name in body.nodes
        }
        called = set()
        for scope in scopes:
            scored = []
            for layer in layers:
                parts = layer.split("/")
                tail = scope[-len(parts) :]
                if len(tail) == len(parts) and all(map(_calls, tail, parts)):
                    scored.append(((len(parts), sum(map(str.__eq__, tail, parts))), layer))
            if scored:
                best = max(score for score, _ in scored)
                winners = [layer for score, layer in scored if score == best]
                if len(winners) == 1:
                    called.add(winners[0])
        return called


def _calls(scope: str, layer: str) -> bool:
    """True if `scope` is a call scope of `layer`: its last part is the layer's, or the layer's
    with the number Keras gives each further call (`dense_1` for `dense`, `teacher_0_1`)."""
    last, own = scope.rpartition("/")[2], layer.rpartition("/")[2]
    return bool(last) and (last == own or re.sub(r"_\d+$", "", last) == own)


# Ops a variable's value passes through before the op that uses it (a read, an identity).
_READS = frozenset({"Identity", "ReadVariableOp", "Cast", "Enter"})


def _first_users(
    source: TensorRef, consumers: Mapping[TensorRef, Sequence[tuple[Node, int]]]
) -> list[Node]:
    """The ops that use a variable's value, past its reads."""
    found = []
    queue = deque([source])
    seen = {source}
    while queue:
        for node, _ in consumers.get(queue.popleft(), ()):
            if node.op_type not in _READS:
                found.append(node)
                continue
            out = TensorRef(node.name, 0)
            if out not in seen:
                seen.add(out)
                queue.append(out)
    return found


def _edge_key(edge: Edge) -> tuple[str, str, str, str]:
    return (edge.source_function or "", edge.source, edge.target_function or "", edge.target)


def _blocker(body: Body, node: Node, reason: Reason, message: str) -> Blocker:
    return Blocker(
        op=node.name,
        op_type=node.op_type,
        reason=reason,
        message=message,
        function=body.name,
        location=node.location,
        missed_override=node.attrs.get(MISSED_OVERRIDE),
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
