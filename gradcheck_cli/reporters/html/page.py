"""The HTML page: a section per checked model (or gradient request) with its header, warnings,
dead variables' stories, summary table and verdict, then the source lines they quote."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gradcheck_cli.analysis.verdicts import Status
from gradcheck_cli.errors import display_path, escape_controls
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.policy import FailOn
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import RULES, VERIFICATION_DISAGREES, VERIFICATION_DISAGREES_NEXT
from gradcheck_cli.reporters import CheckFailure
from gradcheck_cli.reporters.grouping import (
    TABLE_ROWS,
    collapsed_rows,
    group_dead,
    plural,
    same_but_for_the_variable,
)
from gradcheck_cli.reporters.html.markup import code_line, esc, rule_link, source_id
from gradcheck_cli.reporters.html.source import source_section
from gradcheck_cli.reporters.html.story import (
    place,
    shape,
    stories,
    story_ids,
    variable_tag,
)
from gradcheck_cli.reporters.sanitise import printable
from gradcheck_cli.reporters.verdict_text import (
    failing,
    fixable_text,
    total_parts,
    verdict_parts,
)
from gradcheck_cli.version import __version__

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em;
  color: #1b1b1b; background: #fff; line-height: 1.4; }
code, pre, .route { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { margin: 0.3em 0 0.3em 1.5em; white-space: pre-wrap; }
pre.code { color: #333; background: #f5f5f5; padding: 0.2em 0.5em; }
section.report { border-top: 2px solid #ccc; margin-top: 2em; }
.verdict { font-weight: bold; }
.verdict.failed, .status.blocked, .cut-mark, .cut-step { color: #b00; font-weight: bold; }
.verdict.passed, .status.ok { color: #070; font-weight: bold; }
.status.unused, .status.intended { color: #960; font-weight: bold; }
.status.frozen, .quiet, .shape { color: #777; }
.severity-error { color: #b00; } .severity-warning { color: #960; } .severity-info { color: #06c; }
article.story { border-left: 4px solid #b00; padding: 0.2em 1em; margin: 1em 0; }
article.story h4 { margin: 0.3em 0; }
ol.cuts { padding-left: 1.5em; }
li.cut { margin: 0.5em 0; }
p.why, p.still-cut { margin: 0.2em 0 0.2em 1.5em; }
pre.fix-code, ins { color: #070; text-decoration: none; }
del { color: #b00; text-decoration: none; }
table { border-collapse: collapse; }
table.summary td, table.summary th { padding: 0.1em 1em 0.1em 0; text-align: left; }
table.listing td { vertical-align: top; padding: 0 0.5em; }
table.listing pre { margin: 0; }
td.lineno { color: #777; text-align: right; font-family: monospace; }
tr.cut-line { background: #fde8e8; }
tr.created-line { background: #eef3fd; }
figure.model-map { margin: 1em 0; overflow-x: auto; }
figure.model-map svg { display: block; }
figure.model-map figcaption { color: #777; font-size: 0.9em; }
figure.model-map a:hover rect { stroke-width: 3; }
figure.model-map a:hover text { text-decoration: underline; }
tr:target { outline: 2px solid #06c; }
td.notes { font-size: 0.9em; }
"""


def render_html(
    checked: Sequence[Report | CheckFailure],
    fail_on: FailOn = FailOn.ERROR,
    fix_command: str | None = None,
    file_names: Mapping[str, str] | None = None,
) -> str:
    """One self-contained page for every checked model or gradient request, in order: a
    `<section class="report">` each (a model that could not be checked: its error), the
    overall verdict when there are several, then the source lines the reports quote.
    `fix_command`: what writes the fixes, as `TerminalOptions.fix_command`; `file_names`: the
    names to show for some source files (a notebook's cells) in the map, where a file is shown
    by its name alone."""
    items = [item if isinstance(item, CheckFailure) else printable(item) for item in checked]
    reports = [item for item in items if isinstance(item, Report)]
    title = "gradcheck " + ", ".join(
        dict.fromkeys(
            escape_controls(
                display_path(item.path if isinstance(item, CheckFailure) else item.source.path)
            )
            for item in items
        )
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta name="generator" content="gradcheck {esc(__version__)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{esc(title)}</h1>",
    ]
    taken: set[str] = set()  # the stories' ids so far: each one once on the page
    for index, item in enumerate(items):
        if isinstance(item, CheckFailure):
            parts.append(_failure(item))
        else:
            ids = story_ids(item, taken)
            parts.append(_report(item, fail_on, index, ids, fix_command, file_names or {}))
    if len(items) > 1 and reports:
        headline, counts = total_parts(reports, len(items) - len(reports), fail_on)
        failed = any(report.dead or failing(report, fail_on) for report in reports)
        parts.append(
            f'<p class="verdict overall {"failed" if failed else "passed"}">overall: '
            f"{esc(headline)} ({esc(counts)})</p>"
        )
    if source := source_section(reports):
        parts.append(source)
    parts += ["</body>", "</html>"]
    return "\n".join(part for part in parts if part) + "\n"


FRAGMENT_CLASS = "gradcheck-report"
"""The class of the `<div>` a report shown inside another page is, its style scoped to it."""


def html_fragment(
    checked: Sequence[Report | CheckFailure],
    id_prefix: str,
    fail_on: FailOn = FailOn.ERROR,
    fix_command: str | None = None,
    file_names: Mapping[str, str] | None = None,
) -> str:
    """The page's body as one `<div class="gradcheck-report">`, to show inside another page (a
    notebook): its style applies inside the div only, and every id and link within the page
    starts with `id_prefix`, so that two reports on one page keep apart. Each file in
    `file_names` is shown by its name there (a notebook's cell, `Cell In[3]`)."""
    file_names = file_names or {}
    page = render_html(checked, fail_on, fix_command, file_names)
    body = page.split("<body>\n", 1)[1].rsplit("</body>", 1)[0]
    for file in sorted(file_names, key=len, reverse=True):  # a longer path first
        body = body.replace(esc(file), esc(file_names[file]))
    # Every attribute's value is escaped: a `"` in a value or in text is `&quot;`.
    body = body.replace(' id="', f' id="{id_prefix}').replace('href="#', f'href="#{id_prefix}')
    body = body.replace("url(#", f"url(#{id_prefix}")
    style = _scoped(_STYLE, f".{FRAGMENT_CLASS}")
    return f'<div class="{FRAGMENT_CLASS}">\n<style>{style}</style>\n{body}</div>\n'


def _scoped(style: str, scope: str) -> str:
    """`style` with each selector inside `scope` (`body` as `scope` itself)."""

    def rule(match: re.Match[str]) -> str:
        selectors = (s.strip() for s in match[1].split(","))
        inside = ", ".join(scope if s == "body" else f"{scope} {s}" for s in selectors)
        return f"\n{inside} {{{match[2]}}}"

    return re.sub(r"([^{}]+)\{([^}]*)\}", rule, style) + "\n"


def _failure(failure: CheckFailure) -> str:
    return "\n".join(
        [
            '<section class="report failure">',
            f"<h2>gradcheck <code>{esc(escape_controls(display_path(failure.path)))}</code></h2>",
            f'<p class="error">{esc(escape_controls(failure.error))}</p>',
            "</section>",
        ]
    )


def _report(
    report: Report,
    fail_on: FailOn,
    index: int,
    ids: dict[str, str],
    fix_command: str | None,
    file_names: Mapping[str, str],
) -> str:
    source = report.source
    parts = [
        '<section class="report">',
        f"<h2>gradcheck <code>{esc(display_path(source.path))}</code> ({esc(source.kind)}), "
        f"loss <code>{esc(source.loss)}</code></h2>",
        _findings(report),
        _map_section(report, index, ids, file_names),
    ]
    told = stories(report, ids)
    if told:
        parts += ['<div class="stories">', *told, "</div>"]
    parts += [_disagreements(report), _summary(report)]
    headline, counts = verdict_parts(report, fail_on)
    failed = report.dead or failing(report, fail_on)
    parts.append(
        f'<p class="verdict {"failed" if failed else "passed"}">{esc(headline)} ({esc(counts)})</p>'
    )
    if (fixable := fixable_text(report, fix_command)) is not None:
        parts.append(f'<p class="fixable">{esc(fixable)}</p>')
    parts.append("</section>")
    return "\n".join(part for part in parts if part)


def _map_section(
    report: Report, index: int, ids: dict[str, str], file_names: Mapping[str, str]
) -> str:
    """The model's map, drawn when the check drew one (`CheckOptions.model_map`): each node
    with a dead variable linked to its first one's story, each cut to its quoted line."""
    model_map = report.model_map
    if model_map is None or not model_map.nodes:
        return ""
    from gradcheck_cli.reporters.html.map_svg import DEAD, map_svg

    node_links = {}
    for node in model_map.nodes:
        dead = [v.name for v in node.variables if v.status in DEAD and v.name in ids]
        if dead:
            node_links[node.id] = ids[dead[0]]
    cut_links = {
        cut.op: source_id(cut.location)
        for cut in model_map.cuts
        if cut.location is not None and report.code_at(cut.location) is not None
    }
    drawn = map_svg(model_map, f"map{index}", node_links, cut_links, file_names)
    return f'<figure class="model-map">{drawn}<figcaption>the model\'s map</figcaption></figure>'


def _shown(item: Finding) -> bool:
    """The findings the terminal lists without --verbose."""
    rule = RULES[item.code]
    if rule.told_in_story:
        return False
    return item.severity is not Severity.INFO or rule.listed_without_verbose


def _findings(report: Report) -> str:
    shown = [item for item in report.findings if _shown(item)]
    if not shown:
        return ""
    parts = ['<div class="findings">', "<h3>warnings and notes</h3>", "<ul>"]
    for item, others in same_but_for_the_variable(shown):
        where = f" at {place(report, item.location)}" if item.location else ""
        more = f" (the same for {esc(plural(others, 'more variable'))})" if others else ""
        fix = (
            f'<p class="fix"><b>fix:</b> {esc(item.hint)}</p>'
            if item.hint and RULES[item.code].concern is not None
            else ""
        )
        parts.append(
            f'<li class="finding severity-{esc(item.severity.value)}" data-rule="{esc(item.code)}">'
            f"{rule_link(item.code)}{where}: {esc(item.message)}{more}"
            f"{code_line(report.code_at(item.location))}{fix}</li>"
        )
    parts += ["</ul>", "</div>"]
    return "\n".join(parts)


def _disagreements(report: Report) -> str:
    """`--verify` found TensorFlow disagreeing: a gradcheck bug, and what to do about it."""
    verification = report.verification
    if verification is None or not any(
        f.code == VERIFICATION_DISAGREES.code for f in report.findings
    ):
        return ""
    count = plural(len(verification.disagreements), "variable")
    return (
        f'<p class="disagreement"><b>TensorFlow disagrees with gradcheck on {esc(count)}</b> '
        f"({rule_link(VERIFICATION_DISAGREES.code)})<br>next: "
        f"{esc(VERIFICATION_DISAGREES_NEXT)}</p>"
    )


def _summary(report: Report) -> str:
    rows = ['<table class="summary">']
    if len(report.variables) > TABLE_ROWS:
        rows.append("<tr><th>variables</th><th>status</th><th>count</th><th>cuts</th></tr>")
        for row in collapsed_rows(report, group_dead(report)):
            rows.append(
                f"<tr><td>{esc(row.label)}</td>"
                f"<td>{_status_cell(row.status, row.accepted, row.intended)}</td>"
                f"<td>{row.count}</td><td>{row.cuts or ''}</td></tr>"
            )
    else:
        rows.append("<tr><th>variable</th><th>status</th><th>shape</th><th>cuts</th></tr>")
        for verdict in report.variables:
            status = _status_cell(
                verdict.status, report.acceptance(verdict.name), verdict.name in report.intended
            )
            rows.append(
                f"<tr><td>{variable_tag(verdict)}</td><td>{status}</td>"
                f"<td>{esc(shape(verdict))}</td><td>{len(verdict.blockers) or ''}</td></tr>"
            )
    rows.append("</table>")
    return "\n".join(rows)


def _status_cell(status: Status, accepted: str, intended: bool) -> str:
    if accepted:  # allowed or suppressed
        return f'<span class="status frozen">{esc(status.value)} ({esc(accepted)})</span>'
    if intended:
        return f'<span class="status intended">{esc(status.value)} (looks intended)</span>'
    return f'<span class="status {esc(status.value)}">{esc(status.value)}</span>'
