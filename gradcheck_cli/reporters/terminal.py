"""The terminal report: a table of the variables, then the cuts of each dead one."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.findings.finding import Severity
from gradcheck_cli.findings.report import Report
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import display_path

_STATUS_STYLE = {
    Status.OK: "green",
    Status.BLOCKED: "bold red",
    Status.UNUSED: "bold yellow",
    Status.FROZEN: "dim",
}
_SEVERITY_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render_terminal(report: Report, *, color: bool, width: int = 100) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
    )
    write(console, report)
    return buffer.getvalue()


def write(console: Console, report: Report) -> None:
    source = report.source
    console.print(
        f"[bold]gradcheck[/] {escape(source.path)} ({escape(source.kind)}), "
        f"loss [bold]{escape(source.loss)}[/]"
    )
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("variable", overflow="fold")
    table.add_column("status")
    table.add_column("shape")
    table.add_column("cuts", justify="right")
    for verdict in report.variables:
        table.add_row(
            escape(verdict.name),
            Text(verdict.status.value, style=_STATUS_STYLE[verdict.status]),
            escape(_shape(verdict)),
            str(len(verdict.blockers)) if verdict.blockers else "",
        )
    console.print(table)
    for verdict in report.dead:
        _write_dead(console, verdict)
    findings = [f for f in report.findings if f.variable is None]
    if findings:
        console.print()
    for finding in findings:
        style = _SEVERITY_STYLE[finding.severity]
        console.print(f"[{style}]{finding.code}[/] {escape(finding.message)}")
    console.print()
    console.print(_verdict_line(report))


def _write_dead(console: Console, verdict: VariableVerdict) -> None:
    console.print()
    style = _STATUS_STYLE[verdict.status]
    created = f" (created at {escape(_where(verdict.location))})" if verdict.location else ""
    console.print(f"[{style}]{verdict.status.value}[/] [bold]{escape(verdict.name)}[/]{created}")
    if verdict.status is Status.UNUSED:
        console.print(f"  never reaches the loss: {escape(verdict.explanation or '')}")
        return
    for blocker in verdict.blockers:
        where = _where(blocker.location) if blocker.location else f"op {blocker.op}"
        console.print(
            f"  [red]cut[/] {escape(blocker.op_type)} [dim]{escape(blocker.op)}[/] "
            f"at {escape(where)}: {escape(blocker.message)} [dim]({blocker.reason.value})[/]"
        )


def _where(location: SourceLocation) -> str:
    return f"{display_path(location.file)}:{location.line}"


def _shape(verdict: VariableVerdict) -> str:
    if verdict.shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in verdict.shape) + "]"


def _verdict_line(report: Report) -> str:
    summary = report.summary
    counts = ", ".join(f"{summary[k]} {k}" for k in ("ok", "blocked", "unused", "frozen"))
    dead = len(report.dead)
    if dead:
        return (
            f"[bold red]{dead} of {summary['trainable']} trainable variables are dead[/] ({counts})"
        )
    return f"[bold green]every trainable variable gets gradient[/] ({counts})"
