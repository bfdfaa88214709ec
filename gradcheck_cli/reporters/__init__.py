"""Reporters: each renders a Report to text, nothing more."""

from __future__ import annotations

import enum
import os


class Format(str, enum.Enum):
    TERMINAL = "terminal"
    JSON = "json"
    DOT = "dot"


def render(report: object, output_format: Format, terminal: object = None) -> str:
    """The report in `output_format`; `terminal` (TerminalOptions) shapes the terminal format."""
    from gradcheck_cli.findings.report import Report

    assert isinstance(report, Report)
    if output_format is Format.JSON:
        from gradcheck_cli.reporters.json_reporter import render_json

        return render_json(report)
    if output_format is Format.DOT:
        from gradcheck_cli.reporters.dot import render_dot

        return render_dot(report)
    from gradcheck_cli.reporters.terminal import TerminalOptions, render_terminal

    options = terminal if isinstance(terminal, TerminalOptions) else TerminalOptions()
    return render_terminal(report, options)


def display_path(path: str) -> str:
    """A path relative to the working directory when it lies inside it, else as given."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if relative.startswith("..") else relative
