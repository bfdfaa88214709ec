"""The Graphviz (DOT) report: the subgraph between the dead variables and the loss."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gradcheck_cli.analysis.verdicts import Edge, Status, VariableVerdict
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters import display_path
from gradcheck_cli.reporters.sanitise import printable

_LOSS = "loss"
_VARIABLE_STYLE = {
    Status.BLOCKED: {"color": "red", "fontcolor": "red"},
    Status.UNUSED: {"color": "orange", "fontcolor": "darkorange"},
}
_CUT_STYLE = {"color": "red", "fontcolor": "red", "penwidth": "2"}
_FIX_STYLE = {"shape": "note", "color": "darkgreen", "fontcolor": "darkgreen"}
# Top-down, a long chain of ops is a column as tall as the chain: past FOLD ops it is
# folded into rows of ROW, read left to right, one under the other.
ROW = 4
FOLD = 2 * ROW
FIX_WIDTH = 60


class _LeftAligned(tuple[str, ...]):
    """The lines of a label, each aligned left (a fix's code keeps its indentation)."""


# An attribute value: a string, or the lines of a label (joined with DOT's own line break).
_Value = str | tuple[str, ...]


def quote(text: str) -> str:
    """`text` as a DOT double-quoted string.

    Only `"` needs escaping for the DOT parser, but labels also read backslash sequences
    (`\\n`, `\\l`, `\\N`...), so a backslash is doubled: names keep their own backslashes.
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n") + '"'


@dataclass(frozen=True)
class _OpFacts:
    """What the verdicts tell about an op: its type, why gradient stops there, a short name."""

    op_type: str | None = None
    reasons: frozenset[str] = frozenset()
    shown: str | None = None

    def merge(self, other: _OpFacts) -> _OpFacts:
        return _OpFacts(
            self.op_type or other.op_type, self.reasons | other.reasons, self.shown or other.shown
        )


@dataclass(frozen=True)
class _EdgeFacts:
    cut: bool = False
    reasons: frozenset[str] = frozenset()
    # Dashed: the ops between the two ends are not known.
    dashed: bool = False
    # From a variable to the note with its fix: no data flows there.
    note: bool = False

    def merge(self, other: _EdgeFacts) -> _EdgeFacts:
        return _EdgeFacts(
            self.cut or other.cut,
            self.reasons | other.reasons,
            self.dashed and other.dashed,
            self.note and other.note,
        )


@dataclass
class _Graph:
    """Dead variables, ops and edges, united over every dead variable."""

    variables: dict[str, VariableVerdict] = field(default_factory=dict)
    ops: dict[str, _OpFacts] = field(default_factory=dict)
    edges: dict[tuple[str, str], _EdgeFacts] = field(default_factory=dict)

    def op(self, name: str, facts: _OpFacts) -> str:
        node = f"op:{name}"
        self.ops[node] = self.ops.get(node, _OpFacts()).merge(facts)
        return node

    def edge(self, source: str, target: str, facts: _EdgeFacts) -> None:
        key = (source, target)
        self.edges[key] = self.edges[key].merge(facts) if key in self.edges else facts


def render_dot(report: Report) -> str:
    """A Graphviz digraph, top-down: dead variables (boxes) with their fix (a note), the ops
    on their paths (ellipses, with cut edges red and bold, labelled with the reason; a long
    chain folded into rows), the loss, and an "unused" cluster."""
    report = printable(report)
    return _document(_title(report), _body(report, prefix="", indent="  "))


def render_dot_clusters(reports: Sequence[Report]) -> str:
    """Several models in one digraph: each model's graph (as render_dot draws it) in a cluster
    of its own, node names prefixed with the model's number so models never share a node."""
    lines: list[str] = []
    for number, report in enumerate(map(printable, reports), start=1):
        lines += [
            f"  subgraph {quote(f'cluster_model_{number}')} {{",
            f"    label={quote(_title(report))};",
            *_body(report, prefix=f"model {number}/", indent="    "),
            "  }",
        ]
    return _document(f"gradcheck, {len(reports)} models", lines)


def _title(report: Report) -> str:
    return f"gradcheck {display_path(report.source.path)}, loss {report.source.loss}"


def _body(report: Report, prefix: str, indent: str) -> list[str]:
    graph = _Graph()
    for verdict in report.variables:
        if verdict.status is Status.BLOCKED:
            _add_blocked(graph, verdict)
    unused = sorted(
        (v for v in report.variables if v.status is Status.UNUSED), key=lambda v: v.name
    )
    return _statements(report, graph, unused, prefix, indent)


def _variable_id(verdict: VariableVerdict) -> str:
    return f"variable:{verdict.name}"


def _add_blocked(graph: _Graph, verdict: VariableVerdict) -> None:
    variable = _variable_id(verdict)
    graph.variables[variable] = verdict
    facts = _FactIndex(verdict)
    edges = list(verdict.subgraph)
    # Route steps name their function, the top graph's included: show their op name alone.
    shown: dict[str, str] = {}
    if not edges:
        edges = _route_edges(verdict)
        shown = {_qualified(step.function, step.op): step.op for step in verdict.route}
    if not edges:
        _add_blockers_only(graph, verdict, variable)
        return
    for edge in edges:
        source, target = (
            graph.op(name, facts.get(name).merge(_OpFacts(shown=shown.get(name))))
            for name in (edge.source, edge.target)
        )
        reasons = facts.get(edge.target).reasons if edge.cut else frozenset()
        graph.edge(source, target, _EdgeFacts(edge.cut, reasons))
    sources = {edge.source for edge in edges}
    targets = {edge.target for edge in edges}
    # The variable enters its subgraph where no edge comes in, and the loss is where no edge
    # goes out; when a loop leaves no such op, the first and last edges name the ends.
    for entry in sorted(sources - targets) or [edges[0].source]:
        graph.edge(variable, f"op:{entry}", _EdgeFacts())
    for exit_ in sorted(targets - sources) or [edges[-1].target]:
        graph.edge(f"op:{exit_}", _LOSS, _EdgeFacts())


def _route_edges(verdict: VariableVerdict) -> list[Edge]:
    steps = verdict.route
    return [
        Edge(_qualified(a.function, a.op), _qualified(b.function, b.op), cut=b.cut is not None)
        for a, b in zip(steps, steps[1:])
    ]


def _add_blockers_only(graph: _Graph, verdict: VariableVerdict, variable: str) -> None:
    # Without a subgraph or a route, draw each cut between the variable and the loss, dashed.
    for blocker in verdict.blockers:
        reasons = frozenset({blocker.reason.value})
        node = graph.op(
            _qualified(blocker.function, blocker.op),
            _OpFacts(blocker.op_type, reasons, shown=blocker.op),
        )
        graph.edge(variable, node, _EdgeFacts(cut=True, reasons=reasons, dashed=True))
        graph.edge(node, _LOSS, _EdgeFacts(dashed=True))
    if not verdict.blockers:
        graph.edge(variable, _LOSS, _EdgeFacts(cut=True, dashed=True))


def _qualified(function: str | None, op: str) -> str:
    return f"{function}/{op}" if function else op


class _FactIndex:
    """Op type and cut reasons of the ops a verdict names, looked up by subgraph node name.

    Subgraph names are `function/op`, with an empty function in the top graph, while blockers
    and route steps also name the top graph's function: an exact `function/op` match wins,
    then a match on the op name alone.
    """

    def __init__(self, verdict: VariableVerdict) -> None:
        self._exact: dict[str, _OpFacts] = {}
        self._bare: dict[str, _OpFacts] = {}
        for step in verdict.route:
            reasons = {step.cut.value} if step.cut is not None else set()
            self._add(step.function, step.op, step.op_type, reasons)
        for blocker in verdict.blockers:
            self._add(blocker.function, blocker.op, blocker.op_type, {blocker.reason.value})

    def _add(self, function: str | None, op: str, op_type: str, reasons: Iterable[str]) -> None:
        facts = _OpFacts(op_type, frozenset(reasons))
        for table, key in (
            (self._exact, _qualified(function, op)),
            (self._bare, op),
            (self._bare, f"/{op}"),
        ):
            table[key] = table.get(key, _OpFacts()).merge(facts)

    def get(self, name: str) -> _OpFacts:
        return self._exact.get(name) or self._bare.get(name) or _OpFacts()


def _variable_attrs(verdict: VariableVerdict) -> dict[str, _Value]:
    return {
        "label": (verdict.name, verdict.status.value),
        "shape": "box",
        **_VARIABLE_STYLE.get(verdict.status, {}),
    }


def _op_attrs(name: str, facts: _OpFacts) -> dict[str, _Value]:
    shown = facts.shown or name.removeprefix("op:")
    # The op type on a second line, unless the name already ends with it ("dense/MatMul").
    if facts.op_type is None or shown.rsplit("/", 1)[-1] == facts.op_type:
        label: tuple[str, ...] = (shown,)
    else:
        label = (shown, facts.op_type)
    attrs: dict[str, _Value] = {"label": label, "shape": "ellipse"}
    if facts.reasons:
        attrs["color"] = "red"
    return attrs


def _edge_attrs(facts: _EdgeFacts) -> dict[str, _Value]:
    attrs: dict[str, _Value] = {}
    if facts.note:
        return {"style": "dotted", "arrowhead": "none", "color": "darkgreen"}
    if facts.cut:
        attrs.update(_CUT_STYLE)
        attrs["style"] = "bold,dashed" if facts.dashed else "bold"
        if facts.reasons:
            attrs["label"] = ", ".join(sorted(facts.reasons))
    elif facts.dashed:
        attrs["style"] = "dashed"
    return attrs


def _document(title: str, body: list[str]) -> str:
    lines = [
        "digraph gradcheck {",
        f"  graph [label={quote(title)}, labelloc=t, rankdir=TB, newrank=true];",
        '  node [fontname="Helvetica"];',
        '  edge [fontname="Helvetica"];',
        *body,
        "}",
    ]
    return "\n".join(lines) + "\n"


def _statements(
    report: Report, graph: _Graph, unused: list[VariableVerdict], prefix: str, indent: str
) -> list[str]:
    def node_id(node: str) -> str:
        return quote(prefix + node)

    nodes: dict[str, dict[str, _Value]] = {
        _LOSS: {"label": f"loss: {report.source.loss}", "shape": "doubleoctagon"}
    }
    nodes.update({node: _variable_attrs(v) for node, v in graph.variables.items()})
    nodes.update({node: _op_attrs(node, facts) for node, facts in graph.ops.items()})
    edges = dict(graph.edges)
    # The fix beside each dead variable, as the terminal report words it; one note per fix.
    beside: dict[str, list[str]] = {}
    for node, verdict in graph.variables.items():
        fix = report.fixes.get(verdict.name)
        if fix:
            still_cut = report.still_cut.get(verdict.name)
            note = f"fix:{still_cut}:{fix}"
            nodes[note] = {"label": _fix_label(fix, still_cut), **_FIX_STYLE}
            edges[(node, note)] = _EdgeFacts(note=True)
            beside.setdefault(note, []).append(node)
    lines = [
        f"{indent}{_statement(node_id(node), attrs)};" for node, attrs in sorted(nodes.items())
    ]
    if unused:
        cluster = f"cluster_{prefix}unused" if prefix else "cluster_unused"
        lines += [
            f"{indent}subgraph {quote(cluster)} {{",
            f"{indent}  label={quote('unused')};",
            f"{indent}  style={quote('dashed')};",
        ]
        lines += [
            f"{indent}  {_statement(node_id(_variable_id(v)), _variable_attrs(v))};" for v in unused
        ]
        lines.append(f"{indent}}}")
    folded = [_rows(chain) for chain in _chains(graph.edges) if len(chain) > FOLD]
    # A row's last op leads to the next row's first without pulling it sideways; an unseen
    # edge keeps the first ops of the rows in one column, so the rows read like lines.
    wraps = {(row[-1], below[0]) for rows in folded for row, below in zip(rows, rows[1:])}
    for (source, target), facts in sorted(edges.items()):
        head = f"{node_id(source)} -> {node_id(target)}"
        attrs = _edge_attrs(facts)
        if (source, target) in wraps:
            attrs["constraint"] = "false"
        lines.append(f"{indent}{_statement(head, attrs)};")
    for rows in folded:
        for row, below in zip(rows, rows[1:]):
            head = f"{node_id(row[0])} -> {node_id(below[0])}"
            lines.append(f"{indent}{_statement(head, {'style': 'invis', 'weight': '10'})};")
    # A note on its variable's rank: beside it, not in the way of the path below.
    ranks = [row for rows in folded for row in rows]
    ranks += [[*variables, note] for note, variables in sorted(beside.items())]
    for row in ranks:
        listed = " ".join(f"{node_id(node)};" for node in row)
        lines.append(f"{indent}{{rank=same; {listed}}}")
    return lines


def _fix_label(fix: str, still_cut: str | None = None) -> _LeftAligned:
    """The cuts behind the stop_gradients and `fix: ` with the fix's words, folded at
    FIX_WIDTH, then its code, each line whole."""
    head, *code = fix.splitlines()
    before = textwrap.wrap(still_cut, FIX_WIDTH) if still_cut else []
    return _LeftAligned((*before, *textwrap.wrap(f"fix: {head}", FIX_WIDTH), *code))


def _rows(chain: list[str]) -> list[list[str]]:
    return [chain[at : at + ROW] for at in range(0, len(chain), ROW)]


def _chains(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Every chain of ops with one edge in and one out, one after the other."""
    successors: dict[str, list[str]] = {}
    predecessors: dict[str, list[str]] = {}
    for source, target in sorted(edges):
        successors.setdefault(source, []).append(target)
        predecessors.setdefault(target, []).append(source)

    def links(node: str) -> bool:
        return len(predecessors.get(node, ())) == 1 and len(successors.get(node, ())) == 1

    chains: list[list[str]] = []
    for start in sorted(successors):
        if links(start):
            continue  # inside a chain: its chain starts where it has more than one edge
        for node in successors[start]:
            chain: list[str] = []
            while links(node) and node not in chain:
                chain.append(node)
                node = successors[node][0]
            chains.append(chain)
    return chains


def _statement(head: str, attrs: dict[str, _Value]) -> str:
    if not attrs:
        return head
    listed = ", ".join(f"{key}={_value(value)}" for key, value in sorted(attrs.items()))
    return f"{head} [{listed}]"


def _value(value: _Value) -> str:
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, _LeftAligned):
        return '"' + "".join(quote(line)[1:-1] + "\\l" for line in value) + '"'
    return '"' + "\\n".join(quote(line)[1:-1] for line in value) + '"'
