"""The source lines a page's reports quote, file by file: each cut line highlighted with its
cut beside it, creation lines anchored, the edits of a code fix as a diff."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import RULE_BY_REASON, RULES
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters.html.markup import esc, rule_link, source_id
from gradcheck_cli.reporters.verdict_text import NOT_TRAINED_HERE


@dataclass
class _Line:
    """One quoted line and what the page says beside it."""

    location: SourceLocation
    code: str
    cuts: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)


def source_section(reports: Sequence[Report]) -> str:
    """`<section class="source">`: per file, its quoted lines in order, annotated; "" when
    the reports quote no line."""
    lines = _quoted_lines(reports)
    if not lines:
        return ""
    by_file: dict[str, list[_Line]] = {}
    for line in sorted(lines.values(), key=lambda item: (item.location.file, item.location.line)):
        by_file.setdefault(line.location.file, []).append(line)
    parts = ['<section class="source">', "<h2>source</h2>"]
    for file, quoted in by_file.items():
        parts += [f"<h3><code>{esc(display_path(file))}</code></h3>", '<table class="listing">']
        previous = None
        for line in quoted:
            if previous is not None and line.location.line > previous + 1:
                parts.append('<tr class="gap"><td class="lineno">⋮</td><td></td><td></td></tr>')
            parts.append(_row(line))
            previous = line.location.line
        parts.append("</table>")
    parts.append("</section>")
    return "\n".join(parts)


def _quoted_lines(reports: Sequence[Report]) -> dict[tuple[str, int], _Line]:
    lines: dict[tuple[str, int], _Line] = {}

    def at(location: SourceLocation | None, report: Report) -> _Line | None:
        code = report.code_at(location)
        if location is None or code is None:
            return None
        key = (location.file, location.line)
        return lines.setdefault(key, _Line(SourceLocation(location.file, location.line), code))

    for report in reports:
        for (file, number), code in report.code.items():
            lines.setdefault((file, number), _Line(SourceLocation(file, number), code))
        for verdict in report.untrained:
            if (line := at(verdict.location, report)) is not None:
                status = (
                    NOT_TRAINED_HERE if verdict.name in report.intended else verdict.status.value
                )
                line.created.append(
                    f'<span class="created">created: <b>{esc(verdict.name)}</b> '
                    f"({esc(status)})</span>"
                )
            for number, blocker in enumerate(verdict.blockers, start=1):
                if (line := at(blocker.location, report)) is not None:
                    code = RULE_BY_REASON[blocker.reason].code
                    line.cuts.append(
                        f'<span class="annotation">cut {number} of <b>{esc(verdict.name)}</b>: '
                        f"{esc(blocker.op_type)} ({rule_link(code)} "
                        f"{esc(blocker.reason.value)}): {esc(blocker.message)}</span>"
                    )
            fix = report.code_fixes.get(verdict.name)
            for edit in fix.edits if fix is not None else ():
                if (line := at(edit.location, report)) is not None:
                    line.edits.append(
                        f'<div class="code-fix"><span class="what">fix of '
                        f"<b>{esc(verdict.name)}</b>: {esc(fix.what)}</span>"
                        f'<pre class="diff"><del>- {esc(edit.original)}</del>\n'
                        f"<ins>+ {esc(edit.replacement)}</ins></pre></div>"
                    )
        for item in report.findings:
            if RULES[item.code].told_in_story:
                continue
            if (line := at(item.location, report)) is not None:
                line.findings.append(
                    f'<span class="annotation">{rule_link(item.code)}: {esc(item.message)}</span>'
                )
    return lines


def _row(line: _Line) -> str:
    classes = ["line"]
    if line.cuts:
        classes.append("cut-line")
    if line.created:
        classes.append("created-line")
    notes = [*line.created, *line.cuts, *dict.fromkeys(line.findings), *line.edits]
    return (
        f'<tr id="{esc(source_id(line.location))}" class="{" ".join(classes)}">'
        f'<td class="lineno">{line.location.line}</td>'
        f'<td><pre class="code">{esc(line.code)}</pre></td>'
        f'<td class="notes">{"<br>".join(notes)}</td></tr>'
    )
