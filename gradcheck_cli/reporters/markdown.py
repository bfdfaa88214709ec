"""The Markdown report for a pull-request comment or a job summary, with Mermaid diagrams."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, VariableVerdict
from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.finding import Severity
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import why_unused
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters.grouping import (
    Group,
    capped,
    group_dead,
    group_label,
    plural,
    scope_lines,
)
from gradcheck_cli.reporters.sanitise import printable
from gradcheck_cli.reporters.verdict_text import NOT_TRAINED_HERE, route_items, verdict_parts

_SEVERITY_MARK = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_CUT_CLASS = "classDef cut stroke:#d00,stroke-width:2px,color:#d00"


def render_markdown(reports: Sequence[Report]) -> str:
    """`## gradcheck`, the verdict, then per model: the dead variables' table (a row per root
    cause), the warnings, and per root cause a Mermaid flowchart of the path to the loss, its
    cuts marked, the variables it cuts and the fix."""
    reports = [printable(report) for report in reports]
    lines = ["## gradcheck", ""]
    if len(reports) == 1:
        lines += [_verdict(reports[0]), ""]
        lines += _section_body(reports[0])
    else:
        lines += [_overall_verdict(reports), ""]
        for report in reports:
            lines += [f"### {_title(report)}", "", _verdict(report), ""]
            lines += _section_body(report)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def _title(report: Report) -> str:
    return f"{_code(display_path(report.source.path))}, loss {_code(report.source.loss)}"


def _verdict(report: Report) -> str:
    headline, counts = verdict_parts(report)
    mark = ":x:" if report.dead else ":white_check_mark:"
    return f"{mark} **{headline}** ({counts})"


def _overall_verdict(reports: Sequence[Report]) -> str:
    dead = sum(len(report.dead) for report in reports)
    trainable = sum(report.summary["trainable"] for report in reports)
    models = f"in {len(reports)} models"
    if dead:
        verb = "is" if dead == 1 else "are"
        return f":x: **{dead} of {trainable} trainable variables {verb} dead** {models}"
    return f":white_check_mark: **every trainable variable gets gradient** {models}"


def _section_body(report: Report) -> list[str]:
    lines: list[str] = []
    groups = group_dead(report)
    if not report.untrained:
        lines += ["No dead trainable variables.", ""]
    if report.untrained:
        lines += ["| variable | status | cuts |", "| --- | --- | --- |"]
        lines += [
            f"| {_cell(_members(group))} | {_status(group)} | {_cell(_cuts(group.first))} |"
            for group in groups
        ]
        lines.append("")
    notes = [item for item in report.findings if not _told_by_table(report, item.variable)]
    if notes:
        lines += ["#### Warnings and notes", ""]
        for item in notes:
            where = f" at {_code(_where(item.location))}" if item.location else ""
            mark = _SEVERITY_MARK[item.severity]
            lines.append(f"- **{item.code}** {mark}{where}: {_inline(item.message)}")
        lines.append("")
    for group in groups:
        lines += _group_story(group, report)
    return lines


def _members(group: Group) -> str:
    if len(group.members) == 1:
        return _code(group.first.name)
    return f"{_code(group_label(group))} ({plural(len(group.members), 'variable')})"


def _status(group: Group) -> str:
    if group.intended is not None:
        return NOT_TRAINED_HERE
    return group.first.status.value


def _group_story(group: Group, report: Report) -> list[str]:
    """The first member's path to the loss, the other members by name scope, the cuts behind
    its stop_gradients, the fix once."""
    first, others = group.first, len(group.members) - 1
    loss = report.source.loss
    same = "cuts" if first.blockers else "reason"
    also = f" (and {plural(others, 'more variable')} with the same {same})" if others else ""
    lines = [f"{_code(first.name)}{also}, path to the loss:", ""]
    lines += [*mermaid(first, loss), ""]
    if others:
        for heading, items in scope_lines(group.members):
            listed = " ".join(capped(items, 100, "layer" if "/" in first.name else "variable"))
            lines.append(f"- {_inline(heading)}: {_inline(listed)}")
        lines.append("")
    if group.intended is not None:
        lines += [f"**Looks intended:** {_inline(group.intended)}", ""]
    still_cut = report.still_cut.get(first.name)
    if still_cut:
        lines += [_inline(still_cut), ""]
    if group.fix:
        head, *code = group.fix.splitlines()
        lines += [f"**Fix:** {_inline(head)}", ""]
        if code:
            # No `python` tag: formatters that rewrite tagged blocks would change the user's code.
            lines += ["```", *textwrap.dedent("\n".join(code)).splitlines(), "```", ""]
        if group.fix_names_member:
            lines += [f"Written for {_code(first.name)}: the same for each, with its own name.", ""]
    return lines


def _told_by_table(report: Report, variable: str | None) -> bool:
    return variable is not None and any(v.name == variable for v in report.untrained)


def _cuts(verdict: VariableVerdict) -> str:
    if verdict.status is Status.UNUSED:
        return _inline(why_unused(verdict) or "never reaches the loss")
    return "<br>".join(_cut(blocker) for blocker in verdict.blockers) or "?"


def _cut(blocker: Blocker) -> str:
    where = _where(blocker.location) if blocker.location else f"op {blocker.op}"
    return f"{_code(blocker.op_type)} at {_code(where)} ({blocker.reason.value})"


def _where(location: SourceLocation) -> str:
    return f"{display_path(location.file)}:{location.line}"


# -- Markdown and HTML text ----------------------------------------------------------------------


def _code(text: str) -> str:
    """`text` as an inline code span, whatever backticks it holds."""
    text = text.replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def _cell(text: str) -> str:
    # GitHub splits table cells on `|` even inside code spans, unless escaped.
    return text.replace("|", "\\|")


def _inline(text: str) -> str:
    """Prose from a model (names included) with Markdown and HTML read as plain text, and
    nothing GitHub would act on: a zero-width space after each `@` (no mention notifies
    anyone, no address becomes a link), inside `www.`, `https://` and before an issue's
    number (no link, no cross-reference)."""
    text = re.sub(r"\s*\n\s*", " ", text)
    text = re.sub(r"([\\`*_\[\]<>|~&])", r"\\\1", text)
    text = re.sub(r"#(?=\d)", "#" + _ZERO_WIDTH, text)  # first: the entity holds `#8`
    text = text.replace("@", "@" + _ZERO_WIDTH)
    text = re.sub(r"(?i)\b(www)\.", rf"\1{_ZERO_WIDTH}.", text)
    return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*):(?=//)", rf"\1{_ZERO_WIDTH}:", text)


_ZERO_WIDTH = "&#8203;"  # an entity: the report's text stays ASCII where the name is


# -- Mermaid -------------------------------------------------------------------------------------


def mermaid(verdict: VariableVerdict, loss: str) -> list[str]:
    """A fenced Mermaid flowchart: the variable, the ops its route shows, the loss; a cut is a
    red node reached by a dotted edge labelled `✂ reason`."""
    nodes: list[tuple[str, str, bool]] = [("variable", verdict.name, False)]
    edges: list[tuple[str, str, str | None]] = []
    previous = "variable"
    if verdict.route:
        for number, item in enumerate(route_items(verdict.route), start=1):
            node = f"step{number}"
            if isinstance(item, int):
                nodes.append((node, f"… {item} ops …", False))
                edges.append((previous, node, None))
            else:
                nodes.append((node, _step_label(item), item.cut is not None))
                edges.append((previous, node, _cut_label(item)))
            previous = node
        edges.append((previous, "loss", None))
    elif verdict.blockers:
        for number, blocker in enumerate(verdict.blockers, start=1):
            node = f"cut{number}"
            nodes.append((node, f"{blocker.op}\n{blocker.op_type}", True))
            edges += [("variable", node, f"✂ {blocker.reason.value}"), (node, "loss", None)]
    else:
        unreached = why_unused(verdict) or verdict.status.value
        edges.append(("variable", "loss", f"✂ {unreached}"))
    nodes.append(("loss", f"loss: {loss}", False))
    lines = ["```mermaid", "flowchart LR"]
    lines += [f'  {node}["{mermaid_label(label)}"]' for node, label, _ in nodes]
    for source, target, label in edges:
        arrow = f'-.->|"{mermaid_label(label)}"|' if label else "-->"
        lines.append(f"  {source} {arrow} {target}")
    cut_nodes = [node for node, _, cut in nodes if cut]
    if cut_nodes:
        lines += [f"  {_CUT_CLASS}", f"  class {','.join(cut_nodes)} cut"]
    lines.append("```")
    return lines


def _step_label(step: PathStep) -> str:
    shown = step.op
    if shown.rsplit("/", 1)[-1] != step.op_type:
        shown += f"\n{step.op_type}"
    return shown


def _cut_label(step: PathStep) -> str | None:
    return f"✂ {step.cut.value}" if step.cut is not None else None


def mermaid_label(text: str) -> str:
    """`text` safe inside a quoted Mermaid label: quotes, brackets of
    every kind, `&`, `|`, `#` and backticks as
    Mermaid entity codes, and line breaks as `<br>`."""
    escaped = (
        text.replace("#", "#35;")
        .replace("&", "#amp;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("`", "#96;")
        .replace("[", "#91;")
        .replace("]", "#93;")
        .replace("(", "#40;")
        .replace(")", "#41;")
        .replace("{", "#123;")
        .replace("}", "#125;")
        .replace("|", "#124;")
    )
    return re.sub(r"\r\n|\r|\n", "<br>", escaped)
