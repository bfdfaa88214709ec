"""Reporters: each renders a Report (or the reports of several models) to text, nothing more."""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from gradcheck_cli.findings.policy import FailOn

if TYPE_CHECKING:
    from gradcheck_cli.findings.report import Report


class Format(str, enum.Enum):
    TERMINAL = "terminal"
    JSON = "json"
    DOT = "dot"
    TEXT = "text"
    SARIF = "sarif"
    GITHUB = "github"
    MARKDOWN = "markdown"
    HTML = "html"


@dataclass(frozen=True)
class TerminalOptions:
    """How the terminal report looks; here, so that choosing it does not load rich."""

    color: bool = False
    # Columns to wrap at, continuation lines indented like their line; None: never wrap (a pipe
    # or a file gets every line whole, as ruff, mypy and pytest write them).
    width: int | None = 100
    focus: str | None = None  # --why VAR
    quiet: bool = False  # -q: one line, the model and its verdict
    verbose: bool = False  # info findings, every variable's own story, a row per variable
    fail_on: FailOn = FailOn.ERROR  # what fails the run: the verdict says so when it does
    # The command that writes the verified fixes, when it is not this one run again with
    # --fix (a report shown in the program's own process); "": none to offer.
    fix_command: str | None = None


@dataclass(frozen=True)
class CheckFailure:
    """A model that could not be checked: the machine formats keep its place and its error."""

    path: str
    error: str
    kind: str | None = None  # when the argument's form says it (a .py script, a .keras file)


def render(
    checked: Report | CheckFailure | Sequence[Report | CheckFailure],
    output_format: Format,
    terminal: object = None,
) -> str:
    """One checked model (a Report, or a CheckFailure) or a sequence of them, in `output_format`.

    `terminal` (TerminalOptions) shapes the terminal format. One item renders as one document
    (a JSON object); a sequence as one document of that format with an entry per item, in
    order (a JSON array, one SARIF run per model, one DOT cluster per model...). JSON, SARIF and
    GitHub give each failure its place, and the HTML page a section; the other formats for people
    leave failures to stderr.
    """
    from gradcheck_cli.findings.report import Report

    many = not isinstance(checked, (Report, CheckFailure))
    batch = (checked,) if isinstance(checked, (Report, CheckFailure)) else tuple(checked)
    assert all(isinstance(item, (Report, CheckFailure)) for item in batch)
    output_format = Format(output_format)
    if output_format is Format.JSON:
        from gradcheck_cli.reporters.json_reporter import render_json, render_json_array

        return render_json_array(batch) if many else render_json(batch[0])
    if output_format is Format.SARIF:
        from gradcheck_cli.reporters.sarif import render_sarif

        return render_sarif(batch)
    if output_format is Format.GITHUB:
        from gradcheck_cli.reporters.github import render_github

        return render_github(batch)
    options = terminal if isinstance(terminal, TerminalOptions) else TerminalOptions()
    if output_format is Format.HTML:  # one page, a model that could not be checked included
        from gradcheck_cli.reporters.html.page import render_html

        return render_html(batch, options.fail_on)
    reports = tuple(item for item in batch if isinstance(item, Report))
    if not reports:
        return ""
    if output_format is Format.DOT:
        from gradcheck_cli.reporters.dot import render_dot, render_dot_clusters

        return render_dot_clusters(reports) if many else render_dot(reports[0])
    if output_format is Format.TEXT:
        from gradcheck_cli.reporters.text import render_text

        return render_text(reports)
    if output_format is Format.MARKDOWN:
        from gradcheck_cli.reporters.markdown import render_markdown

        return render_markdown(reports)
    from gradcheck_cli.reporters.terminal import render_terminal, render_terminal_total

    between = "" if options.quiet else "\n"  # -q: one line per model, nothing between
    text = between.join(render_terminal(report, options) for report in reports)
    # Several reports end with one line for them all (counting those that could not be
    # checked, whose errors went to stderr).
    if len(reports) > 1 and not options.quiet and options.focus is None:
        unchecked = len(batch) - len(reports)
        text += between + render_terminal_total(reports, unchecked, options)
    return text


def auto_color(stream: TextIO) -> bool:
    """Colour as `--color auto` chooses it for `stream`: none with NO_COLOR, colour with
    FORCE_COLOR (any value but empty), else colour on a terminal only."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return stream.isatty()
