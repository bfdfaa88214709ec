"""Dead variables grouped by root cause, so that one cut is told once for all it cuts."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.names import common_scope
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import why_unused

# Beyond this many variables the summary table has a row per group or name scope, not per
# variable: a 174-variable model must still fit on a screen.
TABLE_ROWS = 20
# Names listed under a group before "… and N more".
LISTED_LINES = 3
_NAME = "\x00"


@dataclass(frozen=True)
class Group:
    """Dead variables with the same cuts (or the same reason for being unused) and the same
    advice but for their names; told as one story."""

    members: tuple[VariableVerdict, ...]
    # Why the cut looks intended (the first member's reason), when it does.
    intended: str | None = None
    # The first member's fix, and whether the members' fixes differ by their names (then it
    # applies to each variable with its own name).
    fix: str | None = None
    fix_names_member: bool = False
    # Every trainable variable of one layer, unused: told as the layer's story.
    whole_layer: bool = False

    @property
    def first(self) -> VariableVerdict:
        return self.members[0]

    @property
    def scope(self) -> str | None:
        """The deepest name scope holding every member, if any (`teacher`, `model/pooler`)."""
        return common_scope(v.name for v in self.members)


def group_dead(report: Report) -> tuple[Group, ...]:
    """The report's dead variables in groups, in the order of each group's first member: one
    cause and one advice, the same text or the same but for the variables' own names."""
    by_cause: dict[Hashable, list[list[VariableVerdict]]] = {}
    ordered: list[list[VariableVerdict]] = []
    for verdict in report.untrained:
        candidates = by_cause.setdefault(_cause(verdict), [])
        same = next((g for g in candidates if _same_advice(report, g[0], verdict)), None)
        if same is None:
            candidates.append([verdict])
            ordered.append(candidates[-1])
        else:
            same.append(verdict)
    trainable = [v for v in report.variables if v.status is not Status.FROZEN]
    return tuple(_group(report, tuple(members), trainable) for members in ordered)


def _cause(verdict: VariableVerdict) -> Hashable:
    if verdict.status is Status.BLOCKED:
        return verdict.status, frozenset((b.op, b.function) for b in verdict.blockers)
    owner = verdict.name.split("/")[0] if verdict.name.count("/") >= 2 else ""
    return verdict.status, (verdict.unreached, why_unused(verdict), owner)


def _same_advice(report: Report, first: VariableVerdict, other: VariableVerdict) -> bool:
    """Whether `other` is told as `first` is: the same words of intent and fix, or the same
    but for each one's own names."""
    for texts in (report.intended, report.fixes):
        one, two = texts.get(first.name), texts.get(other.name)
        if one != two and _unnamed(report, first, one) != _unnamed(report, other, two):
            return False
    return True


def _unnamed(report: Report, verdict: VariableVerdict, text: str | None) -> str | None:
    """`text` with every name of the variable (full, Keras path, layer, Python name) replaced
    by one placeholder: advice that differs only by those names is the same advice."""
    if text is None:
        return None
    parts = verdict.name.split("/")
    names = {
        verdict.name,
        verdict.path,
        parts[-1],
        parts[-2] if len(parts) > 1 else None,
        report.python_name(verdict),
    }
    for name in sorted((n for n in names if n), key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(name)}(?!\w)", _NAME, text)
    return text


def _group(
    report: Report, members: tuple[VariableVerdict, ...], trainable: list[VariableVerdict]
) -> Group:
    first = members[0]
    fix = report.fixes.get(first.name)
    layer = first.name.rpartition("/")[0]
    whole_layer = (
        first.status is Status.UNUSED
        and bool(layer)
        and {v.name for v in members} == {v.name for v in trainable if layer_of(v.name) == layer}
        and (len(members) > 1 or first.path not in (None, first.name))
    )
    return Group(
        members,
        intended=report.intended.get(first.name),
        fix=fix,
        fix_names_member=any(report.fixes.get(v.name) != fix for v in members),
        whole_layer=whole_layer,
    )


def layer_of(name: str) -> str:
    """The layer or name scope a variable belongs to (`teacher/dense_3`), or `` for none."""
    return name.rpartition("/")[0]


def scope_lines(members: Iterable[VariableVerdict]) -> list[tuple[str, list[str]]]:
    """Members by top name scope: a heading with counts (`teacher: 104 variables in 52
    layers`) and the layers, each with its weights (`dense_1 (kernel, bias)`)."""
    by_scope: dict[str, dict[str, list[str]]] = {}
    for verdict in members:
        parts = verdict.name.split("/")
        top = parts[0] if len(parts) > 2 else ""
        layer = "/".join(parts[1:-1] if top else parts[:-1])
        by_scope.setdefault(top, {}).setdefault(layer, []).append(parts[-1])
    lines = []
    for top, layers in by_scope.items():
        count = sum(len(weights) for weights in layers.values())
        in_layers = {k: v for k, v in layers.items() if k}
        heading = f"{top}: " if top else ""
        heading += plural(count, "variable")
        if in_layers:
            heading += f" in {plural(len(in_layers), 'layer')}"
        items = [f"{layer} ({', '.join(weights)})" for layer, weights in in_layers.items()]
        items += layers.get("", [])
        lines.append((heading, items))
    return lines


def capped(items: list[str], width: int, noun: str, lines: int = LISTED_LINES) -> list[str]:
    """`items` joined by commas in lines of at most `width` characters, at most `lines` lines;
    what does not fit is counted in a last `… and N more {noun}s`."""
    shown: list[str] = []
    current = ""
    for index, item in enumerate(items):
        rest = len(items) - index
        candidate = f"{current}, {item}" if current else item
        tail = f", … and {_more(rest - 1, noun)}" if rest > 1 and len(shown) == lines - 1 else ""
        if len(candidate + tail) <= width or not current:
            current = candidate
            continue
        if len(shown) == lines - 1:
            return [*shown, f"{current}, … and {_more(rest, noun)}"]
        shown.append(current + ",")
        current = item
    return [*shown, current] if current else shown


def _more(count: int, noun: str) -> str:
    return f"{count} more {noun}" + ("" if count == 1 else "s")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def group_label(group: Group) -> str:
    """A short name for the group in a table row: its variable, its scope or its first name."""
    if len(group.members) == 1:
        return group.first.name
    scope = group.scope
    return f"{scope}/…" if scope else f"{group.first.name} and {len(group.members) - 1} more"


def same_but_for_the_variable(findings: Iterable[Finding]) -> list[tuple[Finding, int]]:
    """Findings that say the same thing at the same place but for the variable's name, once:
    each first one with the number of others."""
    firsts: dict[Hashable, list[Finding]] = {}
    for item in findings:
        message = item.message
        if item.variable:
            message = re.sub(rf"(?<![\w.]){re.escape(item.variable)}(?![\w])", _NAME, message)
        key = (item.code, item.severity, item.location, item.op, message)
        firsts.setdefault(key, []).append(item)
    return [(items[0], len(items) - 1) for items in firsts.values()]


@dataclass(frozen=True)
class Row:
    """One row of a collapsed summary table: a group of dead variables, or the variables of one
    name scope with one status."""

    label: str
    status: Status
    count: int
    cuts: int = 0
    intended: bool = False
    accepted: str = ""  # how the row's variables are accepted: "allowed", "suppressed" or ""


def collapsed_rows(report: Report, groups: tuple[Group, ...]) -> list[Row]:
    """A row per group of dead variables and per name scope and status of the others, in the
    order of the report's variables."""
    group_of = {v.name: group for group in groups for v in group.members}
    buckets: dict[Hashable, list[VariableVerdict]] = {}
    for verdict in report.variables:
        group = group_of.get(verdict.name)
        top = verdict.name.split("/")[0] if verdict.name.count("/") >= 2 else ""
        key = id(group) if group else (top, verdict.status, report.acceptance(verdict.name))
        buckets.setdefault(key, []).append(verdict)
    rows = []
    for members in buckets.values():
        first = members[0]
        group = group_of.get(first.name)
        if group is not None:
            label = group_label(group)
        elif len(members) == 1:
            label = first.name
        else:
            top = first.name.split("/")[0] if first.name.count("/") >= 2 else ""
            label = f"{top}/…" if top else "other variables"
        rows.append(
            Row(
                label,
                first.status,
                len(members),
                len(first.blockers) if group else 0,
                intended=group is not None and group.intended is not None,
                accepted=report.acceptance(first.name),
            )
        )
    return rows
