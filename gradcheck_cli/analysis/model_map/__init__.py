"""The model's map: its layers and name scopes as nodes, the data flow between them as edges,
each node coloured by its variables' verdicts, and the cuts that kill dead variables placed on
the node or edge where they sit.

Ops are grouped by name scope (an op's name without its last part, `encoder/dense_3/MatMul` in
`encoder/dense_3`; `grouping` cuts the scopes to the map's budget and folds repeated
blocks). An op set directly in a scope that has scopes inside it (a residual `Add` beside the
layers) belongs to no node: data passes through it (`flow`), and it is counted in none. A
variable sits with the first op on the loss's way that reads it, else the first op
that uses it at all (a moving mean's update), else under its own name. The walk visits each op
the loss is computed from once: a called function's ops take the call's scope as a prefix
(their own names carry none), its arguments stand for the call's inputs and its returns for the
call's outputs. A function called again is not walked again: that call's inputs flow to what
the function returns where it was first walked.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from gradcheck_cli.analysis.model_map.flow import Flow, reduced
from gradcheck_cli.analysis.model_map.grouping import Group, group_scopes
from gradcheck_cli.analysis.model_map.walk import TOP, VARIABLE, Walk
from gradcheck_cli.analysis.verdicts import Blocker, Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import Program, SourceLocation

MAX_NODES = 60
"""About the most nodes a map keeps readable: deeper scopes fold into their parents."""

MAX_INPUTS = 8
"""More inputs than this are drawn as one `inputs` node."""


INPUTS_ID = "inputs"
LOSS_ID = "loss"


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
    walk = Walk(program, wanted)
    loss_key = walk.run()
    statuses = {verdict.name: _STATUS[verdict.status] for verdict in verdicts}
    homes = _homes(program, walk)
    held: dict[str, list[MapVariable]] = {}  # a scope -> its variables
    for variable in program.variables:
        if variable.name in statuses:
            status = MapVariable(variable.name, statuses[variable.name])
            held.setdefault(homes[VARIABLE + variable.name], []).append(status)
    fixed: dict[str, str] = {}  # raw keys that are not scopes -> their node's id
    inputs = sorted(set(walk.inputs.values()))
    for key, name in walk.inputs.items():
        fixed[key] = f"input:{name}" if len(inputs) <= MAX_INPUTS else INPUTS_ID
    loss_inside = loss_key == TOP  # the loss is computed at the top level: that is its node
    if loss_inside:
        fixed[TOP] = LOSS_ID
    scopes = sorted({*walk.ops, *held} - fixed.keys())
    cut_scopes = {key for key, _ in walk.found.values()}
    between = Flow(walk.edges, {scope: scope for scope in scopes})  # scope to scope
    links = [(scope, target) for scope in scopes for target in between.nearest_onward(scope)]
    budget = max_nodes - len(fixed) - 1
    depth, group_of = group_scopes(scopes, walk.types, held, cut_scopes, budget, links)
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
    loss_ops = walk.ops[TOP] if loss_inside else 0
    loss_variables = tuple(held.get(TOP, ())) if loss_inside else ()
    specials.append(
        MapNode(LOSS_ID, "loss", NodeKind.LOSS, _worst(loss_variables), loss_ops, loss_variables)
    )
    flow = Flow(walk.edges, ids)
    pairs = {(ids[key], target) for key in flow.after if key in ids for target in flow.onward(key)}
    if loss_key is not None and not loss_inside:
        pairs.update((source, LOSS_ID) for source in flow.nodes(loss_key))
    cuts = _cuts(verdicts, walk, ids, flow)
    on_cuts = {(cut.edge.source, cut.edge.target) for cut in cuts if cut.edge is not None}
    pairs = reduced({(s, t) for s, t in pairs if s != t}, on_cuts)
    edges = tuple(sorted(MapEdge(source, target) for source, target in pairs))
    return ModelMap(tuple(specials + nodes), edges, cuts, depth)


def _homes(program: Program, walk: Walk) -> dict[str, str]:
    """Where each variable sits (by its pseudo-key): the scope of the first op on the loss's
    way that reads it, else of the first op anywhere that uses it (a read the loss does not
    need, an update), else its name's scope."""
    flat = program.top_body.nodes
    numbers = {flat.ids[node]: VARIABLE + name for node, name in walk.variables.items()}
    users: dict[str, str] = {}
    for edge, n in flat.edges_from(numbers):
        key = numbers[flat.input_producers[edge]]
        if key not in users:
            users[key] = walk.scope(program.top_body, flat.names[n], "")
    homes = {}
    for variable in program.variables:
        key = VARIABLE + variable.name
        home = walk.readers.get(key, TOP)
        if home == TOP:
            home = users.get(key, TOP)
        if home == TOP:  # used by the loss's own code (no scope), or not at all: by its name
            bare = variable.name.partition(":")[0]
            home = bare.rpartition("/")[0] or bare
        homes[key] = home
    return homes


def _scope_nodes(
    scopes: list[str],
    group_of: Mapping[str, Group],
    walk: Walk,
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
    verdicts: tuple[VariableVerdict, ...], walk: Walk, ids: Mapping[str, str], flow: Flow
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
        froms = (found for source in sources for found in sorted(flow.nearest(source)))
        edge = next((MapEdge(found, node) for found in froms if found != node), None)
        cut = MapCut(blocker.op, blocker.op_type, blocker.reason, node, edge, blocker.function)
        cuts.append(replace(cut, location=blocker.location, variables=tuple(variables)))
    return tuple(cuts)
