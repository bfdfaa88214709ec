"""Each dead variable's story in HTML, told as the terminal tells it: created at, the path to
the loss with its cuts, each cut's rule, line and why, what would still cut it, the fix."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, VariableVerdict
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import RULE_BY_REASON, VARIABLE_NEVER_REACHES_LOSS, why_unused
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters.grouping import Group, group_dead, layer_of, plural, scope_lines
from gradcheck_cli.reporters.html.markup import (
    code_line,
    esc,
    rule_link,
    variable_id,
    where,
    where_link,
)
from gradcheck_cli.reporters.verdict_text import (
    NOT_TRAINED_HERE,
    cut_place,
    group_unused_reason,
    route_items,
    unused_layer_reason,
    written_for,
)


def story_ids(report: Report, taken: set[str]) -> dict[str, str]:
    """The `id` of the story that tells each dead variable's, by the variable's name: its
    story's first variable's `var-NAME`, kept apart from the ids in `taken` (and added)."""
    ids = {}
    for group in group_dead(report):
        anchor = variable_id(group.first.name, taken)
        ids.update((member.name, anchor) for member in group.members)
    return ids


def stories(report: Report, ids: Mapping[str, str]) -> list[str]:
    """A story per root cause of the report's dead variables (a group, a layer, a variable),
    each with its `id` from `ids` (`story_ids`)."""
    told = []
    for group in group_dead(report):
        anchor = f' id="{esc(ids[group.first.name])}"' if group.first.name in ids else ""
        if group.whole_layer:
            told.append(_layer_story(report, group, anchor))
        elif len(group.members) == 1:
            told.append(_variable_story(report, group.first, anchor))
        else:
            told.append(_group_story(report, group, anchor))
    return told


def variable_tag(verdict: VariableVerdict, text: str | None = None) -> str:
    """The variable's name as the page's hook for it: its status and its name as data."""
    return (
        f'<span class="variable status-{esc(verdict.status.value)}" '
        f'data-variable="{esc(verdict.name)}">{esc(verdict.name if text is None else text)}</span>'
    )


def shape(verdict: VariableVerdict) -> str:
    if verdict.shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in verdict.shape) + "]"


def _status(report: Report, verdict: VariableVerdict) -> str:
    if verdict.name in report.intended:
        return f'<span class="status intended">{esc(NOT_TRAINED_HERE)}</span>'
    return f'<span class="status {esc(verdict.status.value)}">{esc(verdict.status.value)}</span>'


def _variable_story(report: Report, verdict: VariableVerdict, anchor: str) -> str:
    code = (
        f" ({rule_link(VARIABLE_NEVER_REACHES_LOSS.code)})"
        if verdict.status is Status.UNUSED
        else ""
    )
    lines = [
        f'<article class="story"{anchor}>',
        f"<h4>{_status(report, verdict)} {variable_tag(verdict)} "
        f'<span class="shape">shape {esc(shape(verdict))}</span>{code}</h4>',
    ]
    intended = report.intended.get(verdict.name)
    if intended is not None:
        lines.append(f"<p>{esc(intended)}</p>")
    lines += _created(report, verdict.location, "created at")
    if verdict.status is Status.UNUSED:
        lines.append(f"<p>never reaches the loss: {esc(why_unused(verdict) or '')}</p>")
    else:
        name = report.python_name(verdict) or verdict.name.split("/")[-1]
        lines += _cuts(report, verdict, "path to the loss:", name)
    lines += _fix(report.fixes.get(verdict.name))
    lines.append("</article>")
    return "\n".join(lines)


def _group_story(report: Report, group: Group, anchor: str) -> str:
    """The cut(s) once, the variables by name scope, the fix once."""
    first, count = group.first, len(group.members)
    lines = [f'<article class="story group"{anchor}>']
    if group.intended is not None:
        lines.append(
            f'<h4><span class="status intended">{esc(NOT_TRAINED_HERE)}</span> '
            f"{esc(plural(count, 'variable'))}</h4>"
        )
        lines.append(f"<p>{esc(group.intended)}</p>")
    else:
        cuts = (
            "the same cut" if len(first.blockers) == 1 else f"the same {len(first.blockers)} cuts"
        )
        by = (
            f" by {esc(cuts)}"
            if first.blockers
            else f", for the same reason ({rule_link(VARIABLE_NEVER_REACHES_LOSS.code)})"
        )
        lines.append(
            f'<h4><span class="status {esc(first.status.value)}">{esc(first.status.value)}'
            f"</span> {esc(plural(count, 'variable'))}{by}</h4>"
        )
    lines += _members(group)
    if len({v.location for v in group.members}) == 1:
        lines += _created(report, first.location, "all created at")
    if first.status is Status.UNUSED:
        reason = group_unused_reason(group.members)
        lines.append(f"<p>{esc(reason)}</p>")
    else:
        heading = f"path to the loss, from {first.name}:"
        lines += _cuts(report, first, heading, first.name.split("/")[-1])
    lines += _fix(group.fix)
    if group.fix is not None and group.fix_names_member:
        lines.append(f"<p>({esc(written_for(first.name))})</p>")
    lines.append("</article>")
    return "\n".join(lines)


def _members(group: Group) -> list[str]:
    """The members by name scope, as the terminal lists them; each member by its whole name."""
    lines = ['<ul class="scopes">']
    for heading, items in scope_lines(group.members):
        lines.append(f"<li><b>{esc(heading)}</b>: {esc(' '.join(items))}</li>")
    lines.append("</ul>")
    members = " ".join(variable_tag(verdict) for verdict in group.members)
    lines.append(
        f'<details class="members"><summary>{esc(plural(len(group.members), "variable"))}'
        f"</summary><p>{members}</p></details>"
    )
    return lines


def _layer_story(report: Report, group: Group, anchor: str) -> str:
    """Every trainable weight of one Keras layer unused: one story."""
    members, first = group.members, group.first
    weights = ", ".join(variable_tag(v, v.name.rpartition("/")[2]) for v in members)
    attribute = first.path.rpartition(".")[0] if first.path and first.path != first.name else None
    holder = f" ({attribute})" if attribute else ""
    status = (
        '<span class="status unused">unused</span>'
        if group.intended is None
        else f'<span class="status intended">{esc(NOT_TRAINED_HERE)}</span>'
    )
    lines = [
        f'<article class="story layer"{anchor}>',
        f"<h4>{status} layer <b>{esc(layer_of(first.name))}</b>{esc(holder)}: {weights} "
        f"({rule_link(VARIABLE_NEVER_REACHES_LOSS.code)})</h4>",
    ]
    if group.intended is not None:
        lines.append(f"<p>{esc(group.intended)}</p>")
    lines += _created(report, first.location, "created at")
    lines.append(f"<p>{esc(unused_layer_reason(first))}</p>")
    lines += _fix(group.fix)
    if group.fix is not None and group.fix_names_member:
        lines.append(f"<p>(written for {esc(first.name)}: the same for each weight)</p>")
    lines.append("</article>")
    return "\n".join(lines)


def _created(report: Report, location: SourceLocation | None, words: str) -> list[str]:
    if location is None:
        return []
    return [
        f'<p class="created">{esc(words)} {place(report, location)}</p>',
        code_line(report.code_at(location)),
    ]


def place(report: Report, location: SourceLocation, text: str | None = None) -> str:
    """`file:line`, linked to the page's source section when the report quotes the line."""
    if report.code_at(location) is None:
        return esc(where(location) if text is None else text)
    return where_link(location, text)


def _cuts(report: Report, verdict: VariableVerdict, heading: str, name: str) -> list[str]:
    """The path to the loss, each cut with its line, the cuts behind its tf.stop_gradients."""
    lines = []
    if verdict.route:
        lines.append(f"<p>{esc(heading)}</p>")
        lines.append(f'<p class="route">{_route(name, verdict.route)}</p>')
    lines.append('<ol class="cuts">')
    for number, blocker in enumerate(verdict.blockers, start=1):
        lines.append(_cut(report, number, blocker))
    lines.append("</ol>")
    still_cut = report.still_cut.get(verdict.name)
    if still_cut:
        lines.append(f'<p class="still-cut">{esc(still_cut)}</p>')
    return lines


def _cut(report: Report, number: int, blocker: Blocker) -> str:
    location = blocker.location
    line = f' data-line="{location.line}"' if location is not None else ""
    shown = cut_place(blocker)
    if location is not None:  # the line linked, whatever the place adds after it
        here = where(location)
        shown = place(report, location) + esc(shown.removeprefix(here))
    else:
        shown = esc(shown)
    code = RULE_BY_REASON[blocker.reason].code
    return (
        f'<li class="cut" data-op="{esc(blocker.op)}"{line} data-rule="{esc(code)}">'
        f'<span class="cut-mark">cut {number}</span> <b>{esc(blocker.op_type)}</b> '
        f"({rule_link(code)} {esc(blocker.reason.value)}) at {shown}"
        f"{code_line(report.code_at(location))}"
        f'<p class="why">{esc(blocker.message)}</p></li>'
    )


def _route(name: str, route: tuple[PathStep, ...]) -> str:
    """`w → Mul → ✂ Cast → … 4 ops … → loss`, as the terminal shows it."""
    parts = [f"<b>{esc(name)}</b>"]
    scope = ""
    for item in route_items(route):
        if isinstance(item, int):
            parts.append(f'<span class="quiet">… {item} ops …</span>')
            continue
        step_scope = item.layer or item.op.rpartition("/")[0]
        shown = ""
        if step_scope and step_scope != scope and step_scope.split("/")[-1] != item.op_type:
            shown = f'<span class="quiet">[{esc(step_scope)}]</span> '
        scope = step_scope
        if item.cut is not None:
            shown += f'<span class="cut-step" title="{esc(item.op)}">✂ {esc(item.op_type)}</span>'
        else:
            shown += f'<span title="{esc(item.op)}">{esc(item.op_type)}</span>'
        parts.append(shown)
    parts.append("<b>loss</b>")
    return " → ".join(parts)


def _fix(fix: str | None) -> list[str]:
    """`fix:` and its first line, then the code to paste."""
    if not fix:
        return []
    head, *code = fix.splitlines()
    lines = [f'<p class="fix"><b>fix:</b> {esc(head)}</p>']
    if code:
        lines.append(f'<pre class="fix-code">{esc(textwrap.dedent(chr(10).join(code)))}</pre>')
    return lines
