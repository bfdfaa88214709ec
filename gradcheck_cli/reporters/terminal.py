"""The terminal report: the story of each dead variable, the warnings, a summary and a verdict."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, Unreached, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.names import variables_named
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import RULES, why_unused
from gradcheck_cli.findings.source import assigned_name
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import display_path
from gradcheck_cli.reporters.verdict_text import route_items, verdict_parts

_STATUS_STYLE = {
    Status.OK: "green",
    Status.BLOCKED: "bold red",
    Status.UNUSED: "bold yellow",
    Status.FROZEN: "dim",
}
_SEVERITY_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


@dataclass(frozen=True)
class TerminalOptions:
    color: bool = False
    width: int = 100
    focus: str | None = None  # --why VAR
    quiet: bool = False  # -q: the verdict only
    verbose: bool = False  # info findings too


def render_terminal(report: Report, options: TerminalOptions) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=options.width,
        force_terminal=options.color,
        no_color=not options.color,
        color_system="standard" if options.color else None,
        highlight=False,
        emoji=False,
    )
    write(console, report, options)
    return buffer.getvalue()


def write(console: Console, report: Report, options: TerminalOptions) -> None:
    if options.quiet:
        console.print(_verdict_line(report))
        return
    source = report.source
    console.print(
        f"[bold]gradcheck[/] {escape(display_path(source.path))} ({escape(source.kind)}), "
        f"loss [bold]{escape(source.loss)}[/]"
    )
    if options.focus is not None:
        chosen = variables_named(report.variables, options.focus, report.code_at)
        for verdict in chosen:
            _write_story(console, report, verdict)
        return
    layers = _unused_layers(report)
    told: set[str] = set()
    for verdict in report.dead:
        layer = _layer_of(verdict.name)
        if layer in layers:
            if layer not in told:
                told.add(layer)
                _write_layer_story(console, report, layer, layers[layer])
            continue
        _write_story(console, report, verdict)
    _write_findings(console, report, options)
    console.print()
    _write_summary(console, report)
    console.print()
    console.print(_verdict_line(report))


# -- one variable ---------------------------------------------------------------------------------


def _write_story(console: Console, report: Report, verdict: VariableVerdict) -> None:
    console.print()
    style = _STATUS_STYLE[verdict.status]
    console.print(
        f"[{style}]{verdict.status.value}[/] [bold]{escape(verdict.name)}[/] "
        f"[dim]shape {escape(_shape(verdict))}[/]"
    )
    if verdict.location is not None:
        console.print(f"  created at {escape(_where(verdict.location))}")
        _write_code(console, report, verdict.location)
    if verdict.status is Status.OK:
        console.print("  gets gradient from the loss")
        return
    if verdict.status is Status.FROZEN:
        console.print("  trainable=False: the optimizer leaves it alone on purpose")
        return
    if verdict.status is Status.UNUSED:
        console.print(f"  never reaches the loss: {escape(why_unused(verdict) or '')}")
    else:
        if verdict.route:
            console.print("  path to the loss:")
            name = assigned_name(report.code_at(verdict.location)) or verdict.name.split("/")[-1]
            console.print(Text("    ") + _route_text(name, verdict.route))
        for number, blocker in enumerate(verdict.blockers, start=1):
            _write_cut(console, report, number, blocker)
        hidden = _hidden_cuts_sentence(verdict)
        if hidden:
            console.print(f"  {escape(hidden)}")
    fix = report.fixes.get(verdict.name)
    if fix:
        head, *code = fix.splitlines()
        console.print(f"  [bold]fix:[/] {escape(head)}")
        for line in code:
            console.print(f"  [green]{escape(line)}[/]", soft_wrap=True)


def _layer_of(name: str) -> str | None:
    return name.rpartition("/")[0] or None


def _unused_layers(report: Report) -> dict[str, list[VariableVerdict]]:
    """Keras layers (by path) whose every trainable variable is unused: told as one story."""
    by_layer: dict[str, list[VariableVerdict]] = {}
    for verdict in report.variables:
        layer = _layer_of(verdict.name)
        if layer is not None and verdict.status is not Status.FROZEN:
            by_layer.setdefault(layer, []).append(verdict)
    return {
        layer: members
        for layer, members in by_layer.items()
        if len(members) > 1 and all(v.status is Status.UNUSED for v in members)
    }


def _write_layer_story(
    console: Console, report: Report, layer: str, members: list[VariableVerdict]
) -> None:
    console.print()
    first = members[0]
    weights = ", ".join(v.name.rpartition("/")[2] for v in members)
    attribute = first.path.rpartition(".")[0] if first.path and first.path != first.name else None
    holder = f" ({attribute})" if attribute else ""
    console.print(
        f"[bold yellow]unused[/] layer [bold]{escape(layer)}[/]{escape(holder)}: {escape(weights)}"
    )
    if first.location is not None:
        console.print(f"  created at {escape(_where(first.location))}")
        _write_code(console, report, first.location)
    if first.unreached is Unreached.READ_NOT_REACHING:
        console.print(
            "  its output is not used by any loss: nothing the loss computes depends on it"
        )
    else:
        console.print(
            "  built but never called in the forward pass: the loss never reads its weights"
        )
    fix = report.fixes.get(first.name)
    if fix:
        console.print(f"  [bold]fix:[/] {escape(fix)}")


def _write_cut(console: Console, report: Report, number: int, blocker: Blocker) -> None:
    if blocker.location is not None:
        where = _where(blocker.location)
    else:
        scope = blocker.op.rpartition("/")[0]
        where = f"op {blocker.op}" + (f" in name scope {scope}" if scope else "")
    if blocker.function is not None:
        where += f" in function {function_name(blocker.function)}"
    console.print(
        f"  [red]cut {number}[/] [bold]{escape(blocker.op_type)}[/] "
        f"[dim]({blocker.reason.value})[/] at {escape(where)}"
    )
    _write_code(console, report, blocker.location)
    console.print(f"      {escape(blocker.message)}")


def _write_code(console: Console, report: Report, location: SourceLocation | None) -> None:
    code = report.code_at(location)
    if location is None or code is None:
        return
    console.print(
        Text(f"    {location.line:>5} | ", style="dim") + Text(code.rstrip()),
        soft_wrap=True,  # code is never cut or folded: the terminal wraps it, copies stay whole
    )


def _route_text(name: str, route: tuple[PathStep, ...]) -> Text:
    """`w → Mul → ✂ Cast → … 4 ops … → loss`: cuts highlighted, pass-through ops left out,
    long runs without a cut collapsed, the name scope (Keras layer) shown where it changes."""
    text = Text(name, style="bold")
    scope = ""
    for item in route_items(route):
        text.append(" → ")
        if isinstance(item, int):
            text.append(f"… {item} ops …", style="dim")
            continue
        step_scope = item.op.rpartition("/")[0]
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


def _hidden_cuts_sentence(verdict: VariableVerdict) -> str | None:
    stops = [b for b in verdict.blockers if b.reason is Reason.STOP_GRADIENT]
    remaining = verdict.cuts_without_stop_gradient
    if not stops or not remaining:
        return None
    stop_text = _list([_at("the tf.stop_gradient", b) for b in stops])
    rest = _list([_at(f"the {b.op_type}", b) for b in remaining])
    return f"even without {stop_text}, {rest} would still cut it."


def _at(what: str, blocker: Blocker) -> str:
    return f"{what} at line {blocker.location.line}" if blocker.location else f"{what} {blocker.op}"


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# -- the rest ------------------------------------------------------------------------------------


def _write_findings(console: Console, report: Report, options: TerminalOptions) -> None:
    shown = [f for f in report.findings if _shown(f, options)]
    if not shown:
        return
    console.print()
    console.print("[bold]warnings and notes[/]")
    for item in shown:
        style = _SEVERITY_STYLE[item.severity]
        where = f" at {escape(_where(item.location))}" if item.location else ""
        console.print(f"  [{style}]{item.code}[/]{where}: {escape(item.message)}")
        _write_code(console, report, item.location)


def _shown(item: Finding, options: TerminalOptions) -> bool:
    rule = RULES[item.code]
    if rule.told_in_story:
        return False
    if item.severity is Severity.INFO:
        return options.verbose or rule.listed_without_verbose
    return True


def _write_summary(console: Console, report: Report) -> None:
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("variable", overflow="fold")
    table.add_column("status")
    table.add_column("shape")
    table.add_column("cuts", justify="right")
    for verdict in report.variables:
        table.add_row(
            escape(verdict.name),
            Text(
                verdict.status.value + (" (allowed)" if verdict.name in report.allowed else ""),
                style="dim" if verdict.name in report.allowed else _STATUS_STYLE[verdict.status],
            ),
            escape(_shape(verdict)),
            str(len(verdict.blockers)) if verdict.blockers else "",
        )
    console.print(table)


def function_name(name: str) -> str:
    """`__inference_bucket_ids_123` -> `bucket_ids`, the name the user gave the function."""
    return re.sub(r"_\d+$", "", name.removeprefix("__inference_"))


def _where(location: SourceLocation) -> str:
    return f"{display_path(location.file)}:{location.line}"


def _shape(verdict: VariableVerdict) -> str:
    if verdict.shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in verdict.shape) + "]"


def _verdict_line(report: Report) -> str:
    headline, counts = verdict_parts(report)
    style = "bold red" if report.dead else "bold green"
    return f"[{style}]{headline}[/] ({counts})"
