"""The model's map: its layers and name scopes as nodes, the data flow between them as edges,
each node coloured by its variables' verdicts, and the cuts that kill dead variables placed on
the node or edge where they sit.

Ops are grouped by name scope (an op's name without its last part, `encoder/dense_3/MatMul` in
`encoder/dense_3`; `map_grouping` cuts the scopes to the map's budget and folds repeated
blocks). A variable sits with the first op on the loss's way that reads it, else the first op
that uses it at all (a moving mean's update), else under its own name. The walk visits each op
the loss is computed from once: a called function's ops take the call's scope as a prefix
(their own names carry none), its arguments stand for the call's inputs and its returns for the
call's outputs. A function called again is not walked again: that call's inputs flow to what
the function returns where it was first walked.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from gradcheck_cli.analysis.control_flow import Step, step_of
from gradcheck_cli.analysis.map_grouping import NUMBERED, Group, group_scopes
from gradcheck_cli.analysis.verdicts import Blocker, Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.registry import load_registry
from gradcheck_cli.graph.model import ARG_OP, Body, Program, SourceLocation, TensorRef

MAX_NODES = 60
"""About the most nodes a map keeps readable: deeper scopes fold into their parents."""

MAX_INPUTS = 8
"""More inputs than this are drawn as one `inputs` node."""

INPUT_OPS = frozenset({"Placeholder", "PlaceholderWithDefault", "PlaceholderV2"})

INPUTS_ID = "inputs"
LOSS_ID = "loss"
_TOP = "(top level)"  # the scope of ops whose names have no "/"


class MapStatus(str, enum.Enum):
    """A map node's colour: the worst of its variables' statuses, worst first."""

    BLOCKED = "blocked"
    UNUSED = "unused"
    ALLOWED = "allowed"  # dead, and accepted (an allow-dead pattern, the baseline, a comment)
    OK = "ok"
    FROZEN = "frozen"
    NONE = "none"  # no variable


_WORST = {status: rank for rank, status in enumerate(MapStatus)}


class NodeKind(str, enum.Enum):
    SCOPE = "scope"
    INPUT = "input"
    LOSS = "loss"


@dataclass(frozen=True)
class MapVariable:
    name: str
    status: MapStatus


@dataclass(frozen=True)
class MapNode:
    """A name scope (or a run of repeated ones, `count` > 1), an input or the loss."""

    id: str
    label: str  # the scope's name, or its folded run's (`encoder/layer_0…11`)
    kind: NodeKind
    status: MapStatus
    ops: int
    variables: tuple[MapVariable, ...] = ()
    count: int = 1  # how many repeated blocks the node stands for
    scopes: tuple[str, ...] = ()  # the scopes folded into it (their full names)


@dataclass(frozen=True, order=True)
class MapEdge:
    source: str
    target: str


@dataclass(frozen=True)
class MapCut:
    """An op that gradient cannot cross on a dead variable's way to the loss: it sits on
    `edge` when the value it cuts comes from another node, else inside `node`."""

    op: str
    op_type: str
    reason: Reason
    node: str
    edge: MapEdge | None = None
    function: str | None = None
    location: SourceLocation | None = None
    variables: tuple[str, ...] = ()
    code: str | None = None  # the finding's code (GC102), filled in with the findings


@dataclass(frozen=True)
class ModelMap:
    nodes: tuple[MapNode, ...]
    edges: tuple[MapEdge, ...]
    cuts: tuple[MapCut, ...] = ()
    depth: int = 1  # the scope depth the nodes are cut at

    def node(self, node_id: str) -> MapNode:
        return next(node for node in self.nodes if node.id == node_id)

    def accepting(self, names: Iterable[str]) -> ModelMap:
        """The map with the dead variables `names` shown as allowed."""
        accepted = set(names)
        nodes = []
        for node in self.nodes:
            variables = tuple(
                replace(v, status=MapStatus.ALLOWED)
                if v.name in accepted and v.status in (MapStatus.BLOCKED, MapStatus.UNUSED)
                else v
                for v in node.variables
            )
            nodes.append(replace(node, variables=variables, status=_worst(variables)))
        return replace(self, nodes=tuple(nodes))

    def with_codes(self, codes: Mapping[str, str]) -> ModelMap:
        """The cuts with their findings' codes, by op name."""
        cuts = tuple(replace(cut, code=codes.get(cut.op, cut.code)) for cut in self.cuts)
        return replace(self, cuts=cuts)


def _worst(variables: Iterable[MapVariable]) -> MapStatus:
    return min((v.status for v in variables), key=_WORST.__getitem__, default=MapStatus.NONE)


_STATUS = {
    Status.BLOCKED: MapStatus.BLOCKED,
    Status.UNUSED: MapStatus.UNUSED,
    Status.OK: MapStatus.OK,
    Status.FROZEN: MapStatus.FROZEN,
}

# Keys of the raw graph: a scope's full name, or one of these.
_INPUT = "\x00input:"
_VARIABLE = "\x00variable:"
_LOSS = "\x00loss"


class _Walk:
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
        top = program.top_body
        self.variables = {
            v.source.node: v.name
            for v in program.variables
            if v.source is not None and v.source.node in top.nodes.ids
        }

    def run(self) -> str | None:
        """Walks the top body from the loss; the loss's key."""
        top = self.program.top_body
        reached = _reaching(top, self.program.loss)
        self._walk(top, reached, "", [], top=True)
        return self._value(top, self.program.loss, "", [], top=True)

    def _walk(
        self, body: Body, reached: Iterable[int], prefix: str, args: list[str | None], top: bool
    ) -> None:
        flat = body.nodes
        names, ops = flat.names, flat.op_table.values
        starts, producers, indices = flat.input_start, flat.input_producers, flat.input_indices
        function = None if top else body.name
        for n in reached:
            name, op = names[n], ops[flat.op_types[n]]
            start, stop = starts[n], starts[n + 1]
            if op == ARG_OP or op in INPUT_OPS or start == stop:
                continue  # an argument, input, variable or constant: a source, not a step
            node = flat.node(n) if flat.calls[n] else None
            step = step_of(node) if node is not None else None
            key = self.scope(body, name, prefix)
            sources = [
                self._value(body, TensorRef(flat.producer_name(p), i), prefix, args, top)
                for p, i in zip(producers[start:stop], indices[start:stop])
            ]
            if (function, name) in self.wanted:
                self.found[(function, name)] = (key, sources)
            callee = step.callees[0] if step and step.callees else None
            if step is not None and callee in self.program.bodies:
                for function_name in (*step.callees, step.condition):
                    if function_name in self.program.bodies:
                        self._call(function_name, key, step, sources)
                continue
            self.ops[key] += 1
            self.types.setdefault(key, Counter())[op] += 1
            for source in sources:
                self._edge(source, key)

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
        if source.startswith(_VARIABLE) and not target.startswith("\x00"):
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
            return _VARIABLE + self.variables[ref.node]
        op = flat.op_table.values[flat.op_types[n]]
        if op == ARG_OP and not top:
            k = body.args.index(ref.node) if ref.node in body.args else -1
            return args[k] if 0 <= k < len(args) else None
        if op == ARG_OP or op in INPUT_OPS:
            key = _INPUT + ref.node
            self.inputs[key] = ref.node
            return key
        if flat.input_start[n] == flat.input_start[n + 1]:
            return None
        if flat.calls[n]:
            step = step_of(flat.node(n))
            returns = self.returns.get(step.callees[0]) if step.callees else None
            if returns and ref.index < len(returns) and returns[ref.index] is not None:
                return returns[ref.index]
        return self.scope(body, ref.node, prefix)

    def scope(self, body: Body, name: str, prefix: str) -> str:
        """The op's scope: its name without the last part, and without the parts that name
        another op (`w/read` is `w`'s, in `w`'s scope), under the calling scope `prefix`."""
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
        if not scope:
            return prefix or _TOP
        if prefix and scope != prefix and not scope.startswith(prefix + "/"):
            return f"{prefix}/{scope}"
        return scope


def _reaching(body: Body, loss: TensorRef) -> list[int]:
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


def model_map(
    program: Program, verdicts: Iterable[VariableVerdict], max_nodes: int = MAX_NODES
) -> ModelMap:
    """The map of `program`, its nodes coloured by `verdicts` and its dead variables' cuts
    placed: linear in the graph's size (each op walked once, then its scopes grouped)."""
    verdicts = tuple(verdicts)
    wanted = {
        (blocker.function, blocker.op)
        for verdict in verdicts
        if verdict.status is Status.BLOCKED
        for blocker in verdict.blockers
    }
    walk = _Walk(program, wanted)
    loss_key = walk.run()
    statuses = {verdict.name: _STATUS[verdict.status] for verdict in verdicts}
    homes = _homes(program, walk)
    held: dict[str, list[MapVariable]] = {}  # a scope -> its variables
    for variable in program.variables:
        if variable.name in statuses:
            status = MapVariable(variable.name, statuses[variable.name])
            held.setdefault(homes[_VARIABLE + variable.name], []).append(status)
    fixed: dict[str, str] = {}  # raw keys that are not scopes -> their node's id
    inputs = sorted(set(walk.inputs.values()))
    for key, name in walk.inputs.items():
        fixed[key] = f"input:{name}" if len(inputs) <= MAX_INPUTS else INPUTS_ID
    loss_inside = loss_key == _TOP  # the loss is computed at the top level: that is its node
    if loss_inside:
        fixed[_TOP] = LOSS_ID
    scopes = sorted({*walk.ops, *held} - fixed.keys() - {_LOSS})
    cut_scopes = {key for key, _ in walk.found.values()}
    depth, group_of = group_scopes(scopes, walk.types, held, cut_scopes, max_nodes - len(fixed) - 1)
    nodes: list[MapNode] = []
    ids = _scope_nodes(scopes, group_of, walk, held, nodes)
    ids.update(fixed)
    for key, home in homes.items():
        ids[key] = ids.get(home, home)
    specials = [
        MapNode(f"input:{name}", name, NodeKind.INPUT, MapStatus.NONE, 0) for name in inputs
    ]
    if len(inputs) > MAX_INPUTS:
        specials = [MapNode(INPUTS_ID, "inputs", NodeKind.INPUT, MapStatus.NONE, 0)]
    loss_ops = walk.ops[_TOP] if loss_inside else 0
    loss_variables = tuple(held.get(_TOP, ())) if loss_inside else ()
    specials.append(
        MapNode(LOSS_ID, "loss", NodeKind.LOSS, _worst(loss_variables), loss_ops, loss_variables)
    )
    edges = {
        MapEdge(ids[source], ids[target])
        for source, target in walk.edges
        if source in ids and target in ids and ids[source] != ids[target]
    }
    if loss_key is not None and not loss_inside and ids.get(loss_key, LOSS_ID) != LOSS_ID:
        edges.add(MapEdge(ids[loss_key], LOSS_ID))
    cuts = _cuts(verdicts, walk, ids)
    return ModelMap(tuple(specials + nodes), tuple(sorted(edges)), cuts, depth)


def _homes(program: Program, walk: _Walk) -> dict[str, str]:
    """Where each variable sits (by its pseudo-key): the scope of the first op on the loss's
    way that reads it, else of the first op anywhere that uses it (a read the loss does not
    need, an update), else its name's scope."""
    flat = program.top_body.nodes
    numbers = {flat.ids[node]: _VARIABLE + name for node, name in walk.variables.items()}
    users: dict[str, str] = {}
    for edge, n in flat.edges_from(numbers):
        key = numbers[flat.input_producers[edge]]
        if key not in users:
            users[key] = walk.scope(program.top_body, flat.names[n], "")
    homes = {}
    for variable in program.variables:
        key = _VARIABLE + variable.name
        home = walk.readers.get(key, _TOP)
        if home == _TOP:
            home = users.get(key, _TOP)
        if home == _TOP:  # used by the loss's own code (no scope), or not at all: by its name
            bare = variable.name.partition(":")[0]
            home = bare.rpartition("/")[0] or bare
        homes[key] = home
    return homes


def _scope_nodes(
    scopes: list[str],
    group_of: Mapping[str, Group],
    walk: _Walk,
    held: Mapping[str, list[MapVariable]],
    nodes: list[MapNode],
) -> dict[str, str]:
    """The scope nodes, appended to `nodes` in the order of their labels; per scope, its node's
    id."""
    members: dict[str, list[str]] = {}
    for scope in scopes:
        members.setdefault(group_of[scope].label, []).append(scope)
    ids: dict[str, str] = {}
    for number, (label, inside) in enumerate(sorted(members.items())):
        node_id = f"s{number}"
        variables = tuple(v for scope in inside for v in held.get(scope, ()))
        nodes.append(
            MapNode(
                node_id,
                label,
                NodeKind.SCOPE,
                _worst(variables),
                sum(walk.ops[scope] for scope in inside),
                variables,
                count=len({group_of[scope].block for scope in inside}),
                scopes=tuple(inside),
            )
        )
        ids.update(dict.fromkeys(inside, node_id))
    return ids


def _cuts(
    verdicts: tuple[VariableVerdict, ...], walk: _Walk, ids: Mapping[str, str]
) -> tuple[MapCut, ...]:
    """One cut per blocking op, with the dead variables it blocks: on the edge from the node its
    cut value comes from, or inside its node."""
    blocking: dict[tuple[str | None, str], tuple[Blocker, list[str]]] = {}
    for verdict in verdicts:
        for blocker in verdict.blockers if verdict.status is Status.BLOCKED else ():
            named = blocking.setdefault((blocker.function, blocker.op), (blocker, []))[1]
            if verdict.name not in named:
                named.append(verdict.name)
    cuts = []
    for where, (blocker, variables) in blocking.items():
        if where not in walk.found:
            continue
        key, sources = walk.found[where]
        node = ids.get(key, LOSS_ID)
        froms = (ids[source] for source in sources if ids.get(source, node) != node)
        edge = next((MapEdge(source, node) for source in froms), None)
        cut = MapCut(blocker.op, blocker.op_type, blocker.reason, node, edge, blocker.function)
        cuts.append(replace(cut, location=blocker.location, variables=tuple(variables)))
    return tuple(cuts)
