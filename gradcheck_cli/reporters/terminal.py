"""The terminal report: the warnings, a story per root cause, a summary and a verdict."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, VariableVerdict
from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.names import variables_named
from gradcheck_cli.findings.policy import FailOn
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import (
    RULE_BY_REASON,
    RULES,
    VARIABLE_NEVER_REACHES_LOSS,
    VERIFICATION_DISAGREES,
    VERIFICATION_DISAGREES_NEXT,
    why_unused,
)
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import TerminalOptions
from gradcheck_cli.reporters.folding import code_lines, print_table
from gradcheck_cli.reporters.folding import print_line as _print
from gradcheck_cli.reporters.grouping import (
    TABLE_ROWS,
    Group,
    capped,
    collapsed_rows,
    group_dead,
    layer_of,
    plural,
    same_but_for_the_variable,
    scope_lines,
)
from gradcheck_cli.reporters.sanitise import printable
from gradcheck_cli.reporters.verdict_text import (
    NOT_TRAINED_HERE,
    cut_place,
    failing,
    fixable_text,
    group_unused_reason,
    request_label,
    route_items,
    total_parts,
    unused_layer_reason,
    verdict_parts,
    written_for,
)

_STATUS_STYLE = {
    Status.OK: "green",
    Status.BLOCKED: "bold red",
    Status.UNUSED: "bold yellow",
    Status.FROZEN: "dim",
}
_INTENDED_HEADER = f"[bold yellow]{NOT_TRAINED_HERE}[/]"
_SEVERITY_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


# How wide the lists of layers are when lines are not wrapped (output to a pipe or a file).
_LIST_WIDTH = 100
_FIX_MARGIN = "  "  # before each line of a fix's code


def render_terminal(report: Report, options: TerminalOptions) -> str:
    buffer = io.StringIO()
    write(_console(buffer, options), report, options)
    return buffer.getvalue()


def _console(buffer: io.StringIO, options: TerminalOptions) -> Console:
    return Console(
        file=buffer,
        # Unwrapped lines still need a width for the table's layout: one no line reaches.
        width=options.width or UNWRAPPED_WIDTH,
        soft_wrap=options.width is None,
        force_terminal=options.color,
        no_color=not options.color,
        color_system="standard" if options.color else None,
        highlight=False,
        emoji=False,
        force_jupyter=False,  # in Jupyter, rich would display each line instead of writing it
    )


def render_terminal_total(
    reports: Sequence[Report], unchecked: int, options: TerminalOptions
) -> str:
    """The line that closes the report of several models (or gradient requests) checked in one
    run: the dead variables of them all, and the counts summed."""
    buffer = io.StringIO()
    console = _console(buffer, options)
    headline, counts = total_parts(reports, unchecked, options.fail_on)
    failed = any(report.dead or failing(report, options.fail_on) for report in reports)
    style = "bold red" if failed else "bold green"
    _print(console, Text.assemble(("overall: ", "bold"), (headline, style), f" ({counts})"))
    return buffer.getvalue()


UNWRAPPED_WIDTH = 1 << 20
"""The console width that stands for "never wrap" (`TerminalOptions.width` None)."""


def write(console: Console, report: Report, options: TerminalOptions) -> None:
    # --why NAME names a variable as the model does: looked up before names are escaped.
    focus = None
    if options.focus is not None:
        position = {id(verdict): index for index, verdict in enumerate(report.variables)}
        chosen = variables_named(report.variables, options.focus, report.python_name)
        focus = [position[id(verdict)] for verdict in chosen]
    report = printable(report)
    if options.quiet:
        # One line per model, even on a narrow terminal: scripts read it line by line.
        line = Text(f"{request_label(report.source)}: ") + _verdict_text(report, options.fail_on)
        if report.source.step is not None:
            line.append(f"; {report.source.step}")
        console.print(line, soft_wrap=True)
        return
    source = report.source
    _print(
        console,
        f"[bold]gradcheck[/] {escape(display_path(source.path))} ({escape(source.kind)}), "
        f"loss [bold]{escape(source.loss)}[/]",
    )
    if focus is not None:
        for index in focus:
            _write_story(console, report, report.variables[index], verbose=True)
        return
    # The warnings first: at the end, above the summary, a terminal keeps the dead variables'
    # stories on screen, the report's most important part.
    _write_findings(console, report, options)
    for group in group_dead(report):
        if group.whole_layer:
            _write_layer_story(console, report, group)
        elif len(group.members) == 1 or options.verbose:
            for verdict in group.members:
                _write_story(console, report, verdict, verbose=options.verbose)
        else:
            _write_group_story(console, report, group, options.width or _LIST_WIDTH)
    _write_disagreements(console, report)
    console.print()
    _write_summary(console, report, options)
    console.print()
    _print(console, _verdict_text(report, options.fail_on))
    if (fixable := fixable_text(report, options.fix_command)) is not None:
        _print(console, escape(fixable))


# -- a group of variables with one root cause ----------------------------------------------------


def _write_group_story(console: Console, report: Report, group: Group, width: int) -> None:
    """The cut(s) once, the variables by name scope with counts, the fix once."""
    console.print()
    first, count = group.first, len(group.members)
    if group.intended is not None:
        _print(console, f"{_INTENDED_HEADER} [bold]{plural(count, 'variable')}[/]")
        _print(console, f"  {escape(group.intended)}")
    else:
        style = _STATUS_STYLE[first.status]
        cuts = (
            "the same cut" if len(first.blockers) == 1 else f"the same {len(first.blockers)} cuts"
        )
        by = f" by {cuts}" if first.blockers else f", for the same reason {_UNUSED_CODE}"
        _print(
            console, f"[{style}]{first.status.value}[/] [bold]{plural(count, 'variable')}[/]{by}"
        )
    scopes = scope_lines(group.members)
    for heading, items in scopes:
        plain = len(scopes) == 1 and "/" not in first.name  # the header already counts them
        if not plain:
            _print(console, f"  [bold]{escape(heading)}[/]")
        indent = "  " if plain else "    "
        for line in capped(
            items, width - len(indent), "layer" if "/" in first.name else "variable"
        ):
            _print(console, f"{indent}{escape(line)}")
    created = {v.location for v in group.members}
    if len(created) == 1 and first.location is not None:
        _print(console, f"  all created at {escape(_where(first.location))}")
        _write_code(console, report, first.location)
    if first.status is Status.UNUSED:
        reason = group_unused_reason(group.members)
        _print(console, f"  {escape(reason)}")
    else:
        heading = f"  path to the loss, from {escape(first.name)}:"
        _write_cuts(console, report, first, heading, first.name.split("/")[-1])
    _write_fix(console, group.fix)
    if group.fix is not None and group.fix_names_member:
        _print(console, f"  ({escape(written_for(first.name))})")
    why = f"--why {escape(group.scope)}, or -v" if group.scope else "-v, or --why NAME"
    _print(console, f"  [dim]each variable's own story: {why}[/]")


# -- one variable ---------------------------------------------------------------------------------


def _write_story(
    console: Console, report: Report, verdict: VariableVerdict, *, verbose: bool = False
) -> None:
    console.print()
    intended = report.intended.get(verdict.name)
    style = _STATUS_STYLE[verdict.status]
    status = f"[{style}]{verdict.status.value}[/]" if intended is None else _INTENDED_HEADER
    code = f" {_UNUSED_CODE}" if verdict.status is Status.UNUSED else ""
    shape = f"[dim]shape {escape(_shape(verdict))}[/]"
    _print(console, f"{status} [bold]{escape(verdict.name)}[/] {shape}{code}")
    if intended is not None:
        _print(console, f"  {escape(intended)}")
    if verdict.location is not None:
        _print(console, f"  created at {escape(_where(verdict.location))}")
        _write_code(console, report, verdict.location)
    if verdict.status is Status.OK:
        _print(console, "  gets gradient from the loss")
        return
    if verdict.status is Status.FROZEN:
        _print(console, "  trainable=False: the optimizer leaves it alone on purpose")
        return
    if verdict.status is Status.UNUSED:
        _print(console, f"  never reaches the loss: {escape(why_unused(verdict) or '')}")
    else:
        name = report.python_name(verdict) or verdict.name.split("/")[-1]
        _write_cuts(console, report, verdict, "  path to the loss:", name)
        if verbose:
            _write_side_cuts(console, report, verdict)
    _write_fix(console, report.fixes.get(verdict.name))


def _write_cuts(
    console: Console, report: Report, verdict: VariableVerdict, heading: str, name: str
) -> None:
    """A blocked variable's path to the loss, each cut with its line, the cuts hiding behind
    its tf.stop_gradients."""
    if verdict.route:
        _print(console, heading)
        _print(console, Text("    ") + _route_text(name, verdict.route))
    for number, blocker in enumerate(verdict.blockers, start=1):
        _write_cut(console, report, number, blocker)
    still_cut = report.still_cut.get(verdict.name)
    if still_cut:
        _print(console, f"  {escape(still_cut)}")


def _write_fix(console: Console, fix: str | None) -> None:
    """`fix:` and its first line, then the code to paste, folded where Python accepts it."""
    if fix:
        head, *code = fix.splitlines()
        _print(console, f"  [bold]fix:[/] {escape(head)}")
        for line in code:
            for part in code_lines(console, line, len(_FIX_MARGIN)):
                console.print(Text.assemble(_FIX_MARGIN, (part, "green")), soft_wrap=True)


def _write_layer_story(console: Console, report: Report, group: Group) -> None:
    """Every trainable weight of one Keras layer unused, with or without a bias: one story."""
    console.print()
    members, first = group.members, group.first
    layer = layer_of(first.name)
    weights = ", ".join(v.name.rpartition("/")[2] for v in members)
    attribute = first.path.rpartition(".")[0] if first.path and first.path != first.name else None
    holder = f" ({attribute})" if attribute else ""
    status = "[bold yellow]unused[/]" if group.intended is None else _INTENDED_HEADER
    named = f"[bold]{escape(layer)}[/]{escape(holder)}: {escape(weights)}"
    _print(console, f"{status} layer {named} {_UNUSED_CODE}")
    if group.intended is not None:
        _print(console, f"  {escape(group.intended)}")
    if first.location is not None:
        _print(console, f"  created at {escape(_where(first.location))}")
        _write_code(console, report, first.location)
    _print(console, f"  {unused_layer_reason(first)}")
    _write_fix(console, group.fix)
    if group.fix is not None and group.fix_names_member:
        _print(console, f"  (written for {escape(first.name)}: the same for each weight)")


def _write_side_cuts(console: Console, report: Report, verdict: VariableVerdict) -> None:
    """-v, --why: the cuts on the variable's other paths, which alone would train nothing."""
    if not verdict.side_cuts:
        return
    _print(
        console,
        "  [dim]side cuts, on other paths to the loss (removing them alone trains nothing):[/]",
    )
    for blocker in verdict.side_cuts:
        _print(
            console,
            f"    {escape(blocker.op_type)} [dim]({_code(blocker)} {blocker.reason.value})[/] "
            f"at {escape(cut_place(blocker))}",
        )
        _write_code(console, report, blocker.location)


# Each dead variable's story carries its rule's code, as every warning does: `--explain CODE`.
_UNUSED_CODE = f"[dim]({VARIABLE_NEVER_REACHES_LOSS.code})[/]"


def _code(blocker: Blocker) -> str:
    return RULE_BY_REASON[blocker.reason].code


def _write_cut(console: Console, report: Report, number: int, blocker: Blocker) -> None:
    where = cut_place(blocker)
    _print(
        console,
        f"  [red]cut {number}[/] [bold]{escape(blocker.op_type)}[/] "
        f"[dim]({_code(blocker)} {blocker.reason.value})[/] at {escape(where)}",
    )
    _write_code(console, report, blocker.location)
    _print(console, f"      {escape(blocker.message)}")


def _write_code(console: Console, report: Report, location: SourceLocation | None) -> None:
    """The user's own line, the report's most important one: in the terminal's normal style
    (the gutter dim), folded between tokens under a gutter without a number."""
    code = report.code_at(location)
    if location is None or code is None:
        return
    gutter = f"    {location.line:>5} | "
    for number, part in enumerate(code_lines(console, code, len(gutter))):
        mark = gutter if number == 0 else f"{'|':>{len(gutter) - 1}} "
        console.print(Text.assemble((mark, "dim"), part), soft_wrap=True)


def _route_text(name: str, route: tuple[PathStep, ...]) -> Text:
    """`w → Mul → ✂ Cast → … 4 ops … → loss`: cuts highlighted, pass-through ops left out,
    long runs without a cut collapsed, the name scope (Keras layer) shown where it changes."""
    text = Text()
    text.append(name, style="bold")  # the name only: a Text's own style would cover the route
    scope = ""
    for item in route_items(route):
        text.append(" → ")
        if isinstance(item, int):
            text.append(f"… {item} ops …", style="dim")
            continue
        step_scope = item.layer or item.op.rpartition("/")[0]
        if step_scope and step_scope != scope and step_scope.split("/")[-1] != item.op_type:
            text.append(f"[{step_scope}] ", style="dim")
        scope = step_scope
        if item.cut is not None:
            text.append(f"✂ {item.op_type}", style="bold red")
        else:
            text.append(item.op_type)
    text.append(" → ")
    text.append("loss", style="bold")
    return text


# -- the rest ------------------------------------------------------------------------------------


def _write_findings(console: Console, report: Report, options: TerminalOptions) -> None:
    shown = [f for f in report.findings if _shown(f, options)]
    if not shown:
        return
    console.print()
    _print(console, "[bold]warnings and notes[/]")
    for item, others in (
        same_but_for_the_variable(shown) if not options.verbose else ((item, 0) for item in shown)
    ):
        style = _SEVERITY_STYLE[item.severity]
        where = f" at {escape(_where(item.location))}" if item.location else ""
        more = f" (the same for {plural(others, 'more variable')})" if others else ""
        _print(console, f"  [{style}]{item.code}[/]{where}: {escape(item.message)}{more}")
        _write_code(console, report, item.location)
        if item.hint and RULES[item.code].concern is not None:
            _print(console, f"      [bold]fix:[/] {escape(item.hint)}")


def _write_disagreements(console: Console, report: Report) -> None:
    """`--verify` found TensorFlow disagreeing: a gradcheck bug, and what to do about it."""
    disagreeing = _disagreements(report)
    if not disagreeing:
        return
    console.print()
    _print(
        console,
        f"[bold red]TensorFlow disagrees with gradcheck on {plural(len(disagreeing), 'variable')}"
        f"[/] ({VERIFICATION_DISAGREES.code}, the tensorflow column below)",
    )
    _print(console, f"  next: {escape(VERIFICATION_DISAGREES_NEXT)}")


def _disagreements(report: Report) -> dict[str, str]:
    """What TensorFlow said of each variable it disagrees on, as long as GC002 is reported."""
    verification = report.verification
    if verification is None or not any(
        f.code == VERIFICATION_DISAGREES.code for f in report.findings
    ):
        return {}
    return {d.variable: d.tensorflow for d in verification.disagreements}


def _shown(item: Finding, options: TerminalOptions) -> bool:
    rule = RULES[item.code]
    if rule.told_in_story:
        return False
    if item.severity is Severity.INFO:
        return options.verbose or rule.listed_without_verbose
    return True


def _write_summary(console: Console, report: Report, options: TerminalOptions) -> None:
    if len(report.variables) > TABLE_ROWS and not options.verbose:
        _write_collapsed_summary(console, report)
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("variable", overflow="fold")
    table.add_column("status")
    table.add_column("shape")
    table.add_column("cuts", justify="right")
    disagreeing = _disagreements(report)
    if disagreeing:
        table.add_column("tensorflow")
    for verdict in report.variables:
        row: list[str | Text] = [
            escape(verdict.name),
            _status_text(
                verdict.status, report.acceptance(verdict.name), verdict.name in report.intended
            ),
            escape(_shape(verdict)),
            str(len(verdict.blockers)) if verdict.blockers else "",
        ]
        if disagreeing:
            said = disagreeing.get(verdict.name)
            row.append(Text(f"{said} (disagrees)", style="bold red") if said else Text(""))
        table.add_row(*row)
    print_table(console, table)


def _write_collapsed_summary(console: Console, report: Report) -> None:
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("variables", overflow="fold")
    table.add_column("status")
    table.add_column("count", justify="right")
    table.add_column("cuts", justify="right")
    for row in collapsed_rows(report, group_dead(report)):
        table.add_row(
            escape(row.label),
            _status_text(row.status, row.accepted, row.intended),
            str(row.count),
            str(row.cuts) if row.cuts else "",
        )
    print_table(console, table)


def _status_text(status: Status, accepted: str, intended: bool) -> Text:
    if accepted:  # allowed or suppressed
        return Text(f"{status.value} ({accepted})", style="dim")
    if intended:
        return Text(f"{status.value} (looks intended)", style="yellow")
    return Text(status.value, style=_STATUS_STYLE[status])


def _where(location: SourceLocation) -> str:
    return f"{display_path(location.file)}:{location.line}"


def _shape(verdict: VariableVerdict) -> str:
    if verdict.shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in verdict.shape) + "]"


def _verdict_text(report: Report, fail_on: FailOn) -> Text:
    headline, counts = verdict_parts(report, fail_on)
    style = "bold red" if report.dead or failing(report, fail_on) else "bold green"
    return Text.assemble((headline, style), f" ({counts})")
