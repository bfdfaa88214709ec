"""The model map's walk: every op the loss is computed from, once, by scope; its op counts and
types, and the edges between scopes that data flows along."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from gradcheck_cli.analysis.control_flow import Step, step_of
from gradcheck_cli.analysis.model_map.grouping import NUMBERED, ancestors
from gradcheck_cli.differentiability.registry import load_registry
from gradcheck_cli.graph.model import ARG_OP, Body, Program, TensorRef

INPUT_OPS = frozenset({"Placeholder", "PlaceholderWithDefault", "PlaceholderV2"})
_SOURCE_OPS = INPUT_OPS | {ARG_OP}

# Keys of the raw graph: a scope's full name, or one of these.
TOP = "(top level)"  # the scope of ops whose names have no "/"
INPUT = "\x00input:"
THROUGH = "\x00through:"  # an op data passes through (`Walk._mark_through`), one key each
VARIABLE = "\x00variable:"


class Walk:
    """Every op the loss is computed from, by scope: op counts and types, and the edges
    between scopes (keys) that data flows along."""

    def __init__(self, program: Program, wanted: set[tuple[str | None, str]]) -> None:
        self.program = program
        self.ops: Counter[str] = Counter()
        self.types: dict[str, Counter[str]] = {}
        self.edges: set[tuple[str, str]] = set()
        self.readers: dict[str, str] = {}  # a variable's pseudo-key -> the first scope reading it
        self.inputs: dict[str, str] = {}  # an input's key -> its name
        self.returns: dict[str, list[str | None]] = {}  # a walked function -> its rets' keys
        # The bodies' op types (one table for all), and those TensorFlow registers a gradient
        # for (or none): a name's part that is one names an op, not a scope.
        registry = load_registry()
        self.known_types = registry.registered | registry.not_differentiable
        self.types_seen: frozenset[str] = self.known_types
        self.types_counted = 0
        self.wanted = wanted  # (function, op) whose key and inputs' keys are kept
        self.found: dict[tuple[str | None, str], tuple[str, list[str | None]]] = {}
        self.through: dict[str, set[int]] = {}  # per body, the ops data passes through
        top = program.top_body
        self.variables = {
            v.source.node: v.name
            for v in program.variables
            if v.source is not None and v.source.node in top.nodes.ids
        }

    def run(self) -> str | None:
        """Walks the top body from the loss; the loss's key."""
        top = self.program.top_body
        reached = reaching(top, self.program.loss)
        self._walk(top, reached, "", [], top=True)
        return self._value(top, self.program.loss, "", [], top=True)

    def _walk(
        self, body: Body, reached: Iterable[int], prefix: str, args: list[str | None], top: bool
    ) -> None:
        flat = body.nodes
        names, ops = flat.names, flat.op_table.values
        starts, producers, indices = flat.input_start, flat.input_producers, flat.input_indices
        function = None if top else body.name
        reached = [
            n
            for n in reached
            if starts[n] != starts[n + 1] and ops[flat.op_types[n]] not in _SOURCE_OPS
        ]  # the steps: no argument, input, variable or constant
        bare = {n: self._bare(body, names[n]) for n in reached}
        self._mark_through(body, bare, function)
        through = self.through[body.name]
        for n in reached:
            name, op = names[n], ops[flat.op_types[n]]
            start, stop = starts[n], starts[n + 1]
            node = flat.node(n) if flat.calls[n] else None
            step = step_of(node) if node is not None else None
            key = THROUGH + prefix + "\x00" + name if n in through else under(bare[n], prefix)
            sources = [
                self._value(body, TensorRef(flat.producer_name(p), i), prefix, args, top)
                for p, i in zip(producers[start:stop], indices[start:stop])
            ]
            if (function, name) in self.wanted:
                self.found[(function, name)] = (key, sources)
            callee = step.callees[0] if step and step.callees else None
            if step is not None and callee in self.program.bodies:
                for function_name in (*step.callees, step.condition):
                    if function_name in self.program.bodies:  # its ops under the call's scope
                        self._call(function_name, "" if key == TOP else key, step, sources)
                continue
            if n not in through:
                self.ops[key] += 1
                self.types.setdefault(key, Counter())[op] += 1
            for source in sources:
                self._edge(source, key)

    def _mark_through(self, body: Body, bare: Mapping[int, str], function: str | None) -> None:
        """Marks the ops of `body` that data passes through on the map: those set directly in
        a scope that has scopes inside it (a model's residual `Add` beside its layers, or
        beside the calls its layers run as functions: their ops go under the calls' scopes; a
        training step's own ops beside the model's), unless one reads a variable, is a cut, a
        call or the loss. Their scope would be one
        node that every layer feeds and is fed by."""
        flat = body.nodes
        parents = {above for scope in bare.values() for above in ancestors(scope)}
        called = {scope for n, scope in bare.items() if flat.calls[n]}
        parents |= called
        # The ops with no scope beside those with one: the user's own step beside the model's
        # layers, or a function's beside the layers it runs under their scopes.
        if any(bare.values()) if function is None else called - {""}:
            parents.add("")
        loss = flat.ids.get(self.program.loss.node) if body is self.program.top_body else None
        self.through[body.name] = {
            n
            for n, scope in bare.items()
            if scope in parents
            and n != loss
            and not flat.calls[n]
            and (function, flat.names[n]) not in self.wanted
            and not any(d == "resource" or d.endswith("_ref") for d in flat.input_dtypes(n) if d)
        }

    def _call(self, name: str, scope: str, step: Step, sources: list[str | None]) -> None:
        """Walks the function `name` that a node in `scope` runs, once."""
        callee = self.program.bodies[name]
        if name in self.returns:  # walked from another call: its inputs flow to its returns
            for source in sources:
                for ret in self.returns[name]:
                    if ret is not None:
                        self._edge(source, ret)
            return
        self.returns[name] = []
        args = [
            sources[step.input_of(k)] if step.input_of(k) < len(sources) else None
            for k in range(len(callee.args))
        ]
        everything = range(len(callee.nodes.names))
        self._walk(callee, everything, scope, args, top=False)
        self.returns[name] = [self._value(callee, ret, scope, args, False) for ret in callee.rets]

    def _edge(self, source: str | None, target: str) -> None:
        if source is None or source == target:
            return
        if source.startswith(VARIABLE) and not target.startswith("\x00"):
            self.readers.setdefault(source, target)
        self.edges.add((source, target))

    def _value(
        self, body: Body, ref: TensorRef, prefix: str, args: list[str | None], top: bool
    ) -> str | None:
        """The key of the scope whose data `ref` is (None: a constant)."""
        flat = body.nodes
        n = flat.ids.get(ref.node)
        if n is None:
            return None
        if top and ref.node in self.variables:
            return VARIABLE + self.variables[ref.node]
        op = flat.op_table.values[flat.op_types[n]]
        if op == ARG_OP and not top:
            k = body.args.index(ref.node) if ref.node in body.args else -1
            return args[k] if 0 <= k < len(args) else None
        inputs = self.program.inputs
        if op == ARG_OP and inputs is not None and ref.node in body.args[inputs:]:
            return None  # a captured constant (a normalization's mean), not an input
        if op == ARG_OP or op in INPUT_OPS:
            key = INPUT + ref.node
            self.inputs[key] = ref.node
            return key
        if flat.input_start[n] == flat.input_start[n + 1]:
            return None
        if flat.calls[n]:
            step = step_of(flat.node(n))
            returns = self.returns.get(step.callees[0]) if step.callees else None
            if returns and ref.index < len(returns) and returns[ref.index] is not None:
                return returns[ref.index]
        if n in self.through.get(body.name, ()):
            return THROUGH + prefix + "\x00" + ref.node
        return self.scope(body, ref.node, prefix)

    def scope(self, body: Body, name: str, prefix: str) -> str:
        """The op's scope under the calling scope `prefix` (see `_bare`)."""
        return under(self._bare(body, name), prefix)

    def _bare(self, body: Body, name: str) -> str:
        """The op's scope: its name without the last part, and without the parts that name
        another op (`w/read` is `w`'s, in `w`'s scope); "" for none."""
        ids, table = body.nodes.ids, body.nodes.op_table
        if self.types_counted != len(table.values):  # kept up to date as the table grows
            self.types_seen = self.known_types.union(table.values)
            self.types_counted = len(table.values)
        types = self.types_seen
        scope = name.rpartition("/")[0]
        # `dense/Cast/ReadVariableOp` is the Cast's, in dense (the Cast may be gone: a graph
        # optimizer drops a Cast to the same dtype, its read keeping the name)
        while scope and (scope in ids or NUMBERED.sub("", scope.rpartition("/")[2]) in types):
            scope = scope.rpartition("/")[0]
        return scope


def under(scope: str, prefix: str) -> str:
    """The key of the bare `scope` of an op called from the scope `prefix`."""
    if not scope:
        return prefix or TOP
    if prefix and scope != prefix and not scope.startswith(prefix + "/"):
        return f"{prefix}/{scope}"
    return scope


def reaching(body: Body, loss: TensorRef) -> list[int]:
    """The numbers of the ops the loss is computed from, in the body's order."""
    flat = body.nodes
    start = flat.ids.get(loss.node)
    if start is None:
        return []
    seen = bytearray(len(flat.names))
    seen[start] = 1
    stack = [start]
    starts, producers = flat.input_start, flat.input_producers
    while stack:
        n = stack.pop()
        for p in producers[starts[n] : starts[n + 1]]:
            if p >= 0 and not seen[p]:
                seen[p] = 1
                stack.append(p)
    return [n for n in range(len(seen)) if seen[n]]
