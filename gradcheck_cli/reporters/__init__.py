"""Reporters: each renders a Report to text, nothing more."""

from __future__ import annotations

import enum
import os


class Format(str, enum.Enum):
    TERMINAL = "terminal"
    JSON = "json"


def render(report: object, output_format: Format, *, color: bool = False, width: int = 100) -> str:
    """The report in `output_format`; colour applies to the terminal format only."""
    from gradcheck_cli.findings.report import Report

    assert isinstance(report, Report)
    if output_format is Format.JSON:
        from gradcheck_cli.reporters.json_reporter import render_json

        return render_json(report)
    from gradcheck_cli.reporters.terminal import render_terminal

    return render_terminal(report, color=color, width=width)


def display_path(path: str) -> str:
    """A path relative to the working directory when it lies inside it, else as given."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if relative.startswith("..") else relative
