"""The Graphviz (DOT) report: the subgraph between the dead variables and the loss."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gradcheck_cli.analysis.verdicts import Edge, NestedCall, Status, VariableVerdict
from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.report import Report
from gradcheck_cli.graph.model import ARG_OP, SourceLocation
from gradcheck_cli.reporters.dot_syntax import LeftAligned, Value, document, quote, statement
from gradcheck_cli.reporters.sanitise import printable
from gradcheck_cli.reporters.verdict_text import function_name

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
# Why a cut stops gradient, beside its edge, and the user's code in an op, folded at these widths.
REASON_WIDTH = 40
CODE_WIDTH = 48


@dataclass(frozen=True)
class _OpFacts:
    """What the report tells about an op: its type, its line, why gradient stops there (in
    the words the terminal uses), its name as shown, what a function argument stands for."""

    op_type: str | None = None
    reasons: frozenset[str] = frozenset()
    shown: str | None = None
    location: SourceLocation | None = None
    cut: bool = False

    def merge(self, other: _OpFacts) -> _OpFacts:
        return _OpFacts(
            self.op_type or other.op_type,
            self.reasons | other.reasons,
            self.shown or other.shown,
            self.location or other.location,
            self.cut or other.cut,
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
    """Dead variables, ops, edges and nested functions, united over every dead variable."""

    variables: dict[str, VariableVerdict] = field(default_factory=dict)
    ops: dict[str, _OpFacts] = field(default_factory=dict)
    edges: dict[tuple[str, str], _EdgeFacts] = field(default_factory=dict)
    # Per function drawn as a cluster: the call that runs it, and the nodes inside it.
    calls: dict[str, NestedCall] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)

    def op(self, name: str, facts: _OpFacts, function: str | None = None) -> str:
        node = f"op:{name}" if function is None else f"op:{function}/{name}"
        self.ops[node] = self.ops.get(node, _OpFacts()).merge(facts)
        if function is not None:
            self.members.setdefault(function, set()).add(node)
        return node

    def edge(self, source: str, target: str, facts: _EdgeFacts) -> None:
        key = (source, target)
        self.edges[key] = self.edges[key].merge(facts) if key in self.edges else facts


def render_dot(report: Report) -> str:
    """A Graphviz digraph, top-down: dead variables (boxes) with their fix (a note), the ops
    on their paths (ellipses: the op, its line of code; cuts red, the cut edge labelled with
    why, in words), the functions a cond, a loop or a call runs (a cluster each, inside which
    their own cuts are marked), the loss, and an "unused" cluster; a long chain of the top
    graph folded into rows."""
    report = printable(report)
    return document(_title(report), _body(report, prefix="", indent="  "))


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
    return document(f"gradcheck, {len(reports)} models", lines)


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
    if not edges:
        edges = _route_edges(verdict)
    if not edges:
        _add_blockers_only(graph, verdict, variable)
        return
    nested = {call.function: call for call in verdict.nested}
    for call in verdict.nested:
        graph.calls.setdefault(call.function, call)
    # The variable's own argument of the loss function is the variable: its box stands for it.
    own = verdict.variable.source.node if verdict.variable.source is not None else None
    # (function, op, calling function, caller): the op feeds an argument of what the caller runs.
    entered = {
        (edge.source_function, edge.source, call.caller_function, call.caller)
        for edge in edges
        if edge.target_function in nested and edge.source_function != edge.target_function
        for call in [nested[edge.target_function]]
    }

    # A function's argument is the value passed in: the variable, or the op that computes it.
    passed = {
        (edge.target_function, edge.target): verdict.name if edge.source == own else edge.source
        for edge in edges
        if edge.target_function in nested and edge.source_function != edge.target_function
    }
    arguments: dict[tuple[str | None, str], str] = {}
    for call in verdict.nested:
        for name, index in call.arguments:
            argument = f"argument {index} of {function_name(call.function)}"
            value = passed.get((call.function, name))
            arguments[(call.function, name)] = (
                f"{value}, passed as {argument}" if value else argument
            )

    def node(function: str | None, name: str) -> str:
        if function is None and name == own:
            return variable
        function = function if function in nested else None
        known = facts.get(function, name)
        shown = arguments.get((function, name), name if function else None)
        if known.op_type == ARG_OP and (function, name) not in arguments:
            owner = function_name(function) if function else "the loss function"
            shown = f"{name}, an argument of {owner}"
        return graph.op(name, known.merge(_OpFacts(shown=shown)), function)

    for edge in edges:
        source_function = edge.source_function if edge.source_function in nested else None
        target_function = edge.target_function if edge.target_function in nested else None
        # The edge into an op that runs a function is drawn into the function, where it goes.
        if (source_function, edge.source, target_function, edge.target) in entered:
            continue
        source = node(source_function, edge.source)
        target = node(target_function, edge.target)
        reasons = facts.get(target_function, edge.target).reasons if edge.cut else frozenset()
        graph.edge(source, target, _EdgeFacts(edge.cut, reasons))
    sources = {(e.source_function, e.source) for e in edges}
    targets = {(e.target_function, e.target) for e in edges}
    # The variable enters its subgraph where no edge comes in, and the loss is where no edge
    # goes out; when a loop leaves no such op, the first and last edges name the ends.
    first, last = edges[0], edges[-1]
    for function, entry in sorted(sources - targets, key=_end_key) or [(None, first.source)]:
        if function is None:
            start = node(None, entry)
            if start != variable:
                graph.edge(variable, start, _EdgeFacts())
    for function, exit_ in sorted(targets - sources, key=_end_key) or [(None, last.target)]:
        if function is None:
            graph.edge(node(None, exit_), _LOSS, _EdgeFacts())


def _end_key(end: tuple[str | None, str]) -> tuple[str, str]:
    return (end[0] or "", end[1])


def _route_edges(verdict: VariableVerdict) -> list[Edge]:
    steps = verdict.route
    return [Edge(a.op, b.op, cut=b.cut is not None) for a, b in zip(steps, steps[1:])]


def _add_blockers_only(graph: _Graph, verdict: VariableVerdict, variable: str) -> None:
    # Without a subgraph or a route, draw each cut between the variable and the loss, dashed.
    for blocker in verdict.blockers:
        reasons = frozenset({blocker.message})
        shown = blocker.op
        if blocker.function is not None:
            shown = f"{blocker.op} in {function_name(blocker.function)}"
        node = graph.op(
            f"{blocker.function}/{blocker.op}" if blocker.function else blocker.op,
            _OpFacts(blocker.op_type, reasons, shown, blocker.location, cut=True),
        )
        graph.edge(variable, node, _EdgeFacts(cut=True, reasons=reasons, dashed=True))
        graph.edge(node, _LOSS, _EdgeFacts(dashed=True))
    if not verdict.blockers:
        graph.edge(variable, _LOSS, _EdgeFacts(cut=True, dashed=True))


class _FactIndex:
    """Type, line and cuts of the ops a verdict names, looked up by function and op name.

    Blockers name the function they lie in, the loss function itself included, while the
    subgraph names only the nested functions: a function the verdict does not enter is the
    loss function's own top graph.
    """

    def __init__(self, verdict: VariableVerdict) -> None:
        self._nested = {call.function for call in verdict.nested}
        self._facts: dict[tuple[str | None, str], _OpFacts] = {}
        for op in verdict.subgraph_ops:
            self._add(op.function, op.op, _OpFacts(op.op_type, location=op.location))
        # A cut inside a function is drawn there, not at the op that runs the function.
        callers = {(call.caller_function, call.caller) for call in verdict.nested}
        for step in verdict.route:
            cut = step.cut is not None and (step.function, step.op) not in callers
            self._add(
                step.function, step.op, _OpFacts(step.op_type, location=step.location, cut=cut)
            )
        for blocker in (*verdict.blockers, *verdict.side_cuts):
            self._add(
                blocker.function,
                blocker.op,
                _OpFacts(
                    blocker.op_type,
                    frozenset({blocker.message}),
                    location=blocker.location,
                    cut=True,
                ),
            )

    def _key(self, function: str | None, op: str) -> tuple[str | None, str]:
        return (function if function in self._nested else None, op)

    def _add(self, function: str | None, op: str, facts: _OpFacts) -> None:
        key = self._key(function, op)
        self._facts[key] = self._facts.get(key, _OpFacts()).merge(facts)

    def get(self, function: str | None, op: str) -> _OpFacts:
        return self._facts.get(self._key(function, op), _OpFacts())


def _variable_attrs(report: Report, verdict: VariableVerdict) -> dict[str, Value]:
    label: tuple[str, ...] = (verdict.name, verdict.status.value)
    if verdict.location is not None:
        label += (f"created at {_where(verdict.location)}", *_code(report, verdict.location))
    if verdict.subgraph_left_out:
        label += (
            f"its subgraph of about {verdict.subgraph_left_out:,} edges is too large to draw:",
            "the route to the loss and its cuts are drawn",
        )
    return {"label": label, "shape": "box", **_VARIABLE_STYLE.get(verdict.status, {})}


def _op_attrs(report: Report, name: str, facts: _OpFacts) -> dict[str, Value]:
    shown = facts.shown or name.removeprefix("op:")
    # The op type on a second line, unless the name already ends with it ("dense/MatMul").
    if (
        facts.op_type is None
        or shown.rsplit("/", 1)[-1] == facts.op_type
        or facts.op_type == ARG_OP
    ):
        label: tuple[str, ...] = (shown,)
    else:
        label = (shown, facts.op_type)
    if facts.location is not None:
        label += (_where(facts.location), *_code(report, facts.location))
    attrs: dict[str, Value] = {"label": label, "shape": "ellipse"}
    if facts.reasons or facts.cut:
        attrs.update({"color": "red", "fontcolor": "red", "penwidth": "2"})
    return attrs


def _where(location: SourceLocation) -> str:
    return f"{display_path(location.file)}:{location.line}"


def _code(report: Report, location: SourceLocation) -> list[str]:
    """The user's code at `location`, folded at CODE_WIDTH (between words: a name stays
    whole), so that a row of ops stays narrow."""
    code = (report.code_at(location) or "").strip()
    return textwrap.wrap(code, CODE_WIDTH, break_long_words=False, break_on_hyphens=False)


def _edge_attrs(facts: _EdgeFacts) -> dict[str, Value]:
    attrs: dict[str, Value] = {}
    if facts.note:
        return {"style": "dotted", "arrowhead": "none", "color": "darkgreen"}
    if facts.cut:
        attrs.update(_CUT_STYLE)
        attrs["style"] = "bold,dashed" if facts.dashed else "bold"
        if facts.reasons:
            attrs["label"] = tuple(
                line
                for reason in sorted(facts.reasons)
                for line in textwrap.wrap(reason, REASON_WIDTH)
            )
    elif facts.dashed:
        attrs["style"] = "dashed"
    return attrs


_ROLES = {
    "then_branch": "true branch of",
    "else_branch": "false branch of",
    "branches": "a branch of",
    "body": "loop body of",
    "cond": "loop condition of",
    "f": "called by",
}


def _cluster_label(report: Report, graph: _Graph, call: NestedCall) -> str:
    caller = graph.ops.get(_caller_node(call), _OpFacts())
    role = _ROLES.get(call.role, call.role.replace("_", " ") + " of")
    where = f", {_where(caller.location)}" if caller.location is not None else ""
    kind = f" ({caller.op_type})" if caller.op_type and caller.op_type != call.caller else ""
    return f"{function_name(call.function)}: {role} {call.caller}{kind}{where}"


def _caller_node(call: NestedCall) -> str:
    if call.caller_function is None:
        return f"op:{call.caller}"
    return f"op:{call.caller_function}/{call.caller}"


def _statements(
    report: Report, graph: _Graph, unused: list[VariableVerdict], prefix: str, indent: str
) -> list[str]:
    def node_id(node: str) -> str:
        return quote(prefix + node)

    nodes: dict[str, dict[str, Value]] = {
        _LOSS: {"label": f"loss: {report.source.loss}", "shape": "doubleoctagon"}
    }
    nodes.update({node: _variable_attrs(report, v) for node, v in graph.variables.items()})
    nodes.update({node: _op_attrs(report, node, facts) for node, facts in graph.ops.items()})
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
    inside = {node for members in graph.members.values() for node in members}
    lines = [
        f"{indent}{statement(node_id(node), attrs)};"
        for node, attrs in sorted(nodes.items())
        if node not in inside
    ]

    def cluster(function: str, depth: int) -> list[str]:
        """The nodes of `function`, and the clusters of the functions its ops run."""
        pad = indent + "  " * depth
        call = graph.calls[function]
        body = [
            f"{pad}subgraph {quote(f'cluster_{prefix}function {function}')} {{",
            f"{pad}  label={quote(_cluster_label(report, graph, call))};",
            f"{pad}  style={quote('rounded')};",
            f"{pad}  color={quote('gray40')};",
        ]
        body += [
            f"{pad}  {statement(node_id(node), nodes[node])};"
            for node in sorted(graph.members.get(function, ()))
        ]
        for inner in sorted(graph.calls):
            if graph.calls[inner].caller_function == function and inner != function:
                body += cluster(inner, depth + 1)
        body.append(f"{pad}}}")
        return body

    for function in sorted(graph.calls):
        if graph.calls[function].caller_function not in graph.calls:
            lines += cluster(function, 0)
    if unused:
        cluster = f"cluster_{prefix}unused" if prefix else "cluster_unused"
        lines += [
            f"{indent}subgraph {quote(cluster)} {{",
            f"{indent}  label={quote('unused')};",
            f"{indent}  style={quote('dashed')};",
        ]
        lines += [
            f"{indent}  {statement(node_id(_variable_id(v)), _variable_attrs(report, v))};"
            for v in unused
        ]
        lines.append(f"{indent}}}")
    # Only the top graph's chains: a row must not cross a function's frame.
    top = [(s, t) for s, t in graph.edges if s not in inside and t not in inside]
    folded = [_rows(chain) for chain in _chains(top) if len(chain) > FOLD]
    # A row's last op leads to the next row's first without pulling it sideways; an unseen
    # edge keeps the first ops of the rows in one column, so the rows read like lines.
    wraps = {(row[-1], below[0]) for rows in folded for row, below in zip(rows, rows[1:])}
    for (source, target), facts in sorted(edges.items()):
        head = f"{node_id(source)} -> {node_id(target)}"
        attrs = _edge_attrs(facts)
        if (source, target) in wraps:
            attrs["constraint"] = "false"
        lines.append(f"{indent}{statement(head, attrs)};")
    for rows in folded:
        for row, below in zip(rows, rows[1:]):
            head = f"{node_id(row[0])} -> {node_id(below[0])}"
            lines.append(f"{indent}{statement(head, {'style': 'invis', 'weight': '10'})};")
    # A note on its variable's rank: beside it, not in the way of the path below.
    ranks = [row for rows in folded for row in rows]
    ranks += [[*variables, note] for note, variables in sorted(beside.items())]
    for row in ranks:
        listed = " ".join(f"{node_id(node)};" for node in row)
        lines.append(f"{indent}{{rank=same; {listed}}}")
    return lines


def _fix_label(fix: str, still_cut: str | None = None) -> LeftAligned:
    """The cuts behind the stop_gradients and `fix: ` with the fix's words, folded at
    FIX_WIDTH, then its code, each line whole."""
    head, *code = fix.splitlines()
    before = textwrap.wrap(still_cut, FIX_WIDTH) if still_cut else []
    return LeftAligned((*before, *textwrap.wrap(f"fix: {head}", FIX_WIDTH), *code))


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
