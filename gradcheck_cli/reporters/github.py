"""GitHub Actions workflow commands: an annotation per dead variable, warning and notice, and an
error per model that could not be checked."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck_cli.analysis.verdicts import VariableVerdict
from gradcheck_cli.errors import display_path, escape_controls
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.source import notebook_cell
from gradcheck_cli.reporters import CheckFailure
from gradcheck_cli.reporters.sanitise import printable

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def render_github(checked: Sequence[Report | CheckFailure]) -> str:
    """One `::error` per dead variable (a variable cut in three places is one annotation, at
    its first cut, naming every cut), one `::warning` or `::notice` per other finding, and one
    `::error` per model that could not be checked, in the order of the models."""
    lines: list[str] = []
    for item in checked:
        if isinstance(item, CheckFailure):
            title = f"gradcheck could not check {escape_controls(display_path(item.path))}"
            # The error is gradcheck's own sentence, its user values escaped when it was made.
            lines.append(f"::error title={escape_property(title)}::{escape_data(item.error)}")
            continue
        report = printable(item)
        verdicts = {verdict.name: verdict for verdict in report.variables}
        # Each entry is a finding alone, or the error findings of one variable.
        entries: list[list[Finding]] = []
        by_variable: dict[str, list[Finding]] = {}
        for item in report.findings:
            if item.severity is not Severity.ERROR or item.variable is None:
                entries.append([item])
            elif item.variable in by_variable:
                by_variable[item.variable].append(item)
            else:
                by_variable[item.variable] = [item]
                entries.append(by_variable[item.variable])
        for entry in entries:
            # A dead variable's errors: the cuts behind its stop_gradients, as in every format.
            dead = entry[0].severity is Severity.ERROR
            still_cut = report.still_cut.get(entry[0].variable or "") if dead else None
            if len(entry) == 1:
                lines.append(_command(entry[0], _explained(entry[0].message, entry[0], still_cut)))
            else:
                verdict = verdicts.get(entry[0].variable or "")
                lines.append(_dead_variable_command(verdict, entry, still_cut))
    return "".join(line + "\n" for line in lines)


def _dead_variable_command(
    verdict: VariableVerdict | None, items: list[Finding], still_cut: str | None
) -> str:
    # Along the path from the variable to the loss, the first cut comes first.
    order = {b.op: number for number, b in enumerate(verdict.blockers)} if verdict else {}
    items = sorted(items, key=lambda item: order.get(item.op or "", len(order)))
    status = verdict.status.value if verdict else "dead"
    lines = [f"{items[0].variable} is {status}: {len(items)} cuts between it and the loss"]
    lines += [f"- {_where(item)}{item.code} {item.message}" for item in items]
    return _command(items[0], _explained("\n".join(lines), items[0], still_cut))


def _explained(message: str, item: Finding, still_cut: str | None) -> str:
    """The message, the cuts that hide behind the variable's stop_gradients, its one fix."""
    parts = [message]
    if still_cut:
        parts.append(still_cut)
    if item.hint:
        parts.append(f"fix: {item.hint}")
    return "\n".join(parts)


def _where(item: Finding) -> str:
    if item.location is None:
        return ""
    return f"{display_path(item.location.file)}:{item.location.line}: "


def _command(item: Finding, message: str) -> str:
    """The workflow command for `item`, at its file and line when it has them."""
    properties: list[tuple[str, str]] = []
    title = f"{item.code} {item.rule}"
    cell = notebook_cell(item.location.file) if item.location is not None else None
    if cell is not None and item.location is not None:
        # A notebook's lines are counted per cell, not in the .ipynb file: no line property.
        notebook, index = cell
        properties.append(("file", display_path(str(notebook))))
        title += f" (cell {index}, line {item.location.line})"
    elif item.location is not None:
        properties += [
            ("file", display_path(item.location.file)),
            ("line", str(item.location.line)),
        ]
    properties.append(("title", title))
    listed = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{_COMMAND[item.severity]} {listed}::{escape_data(message)}"


def escape_data(text: str) -> str:
    """A command's message, escaped as @actions/core does (`%`, CR and LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command property's value: the message escapes, and `:` and `,` as well."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
