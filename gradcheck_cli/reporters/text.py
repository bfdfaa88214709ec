"""The grep-friendly report: one plain line per finding, `path:line: CODE severity rule: ...`."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters.sanitise import printable


def render_text(reports: Sequence[Report]) -> str:
    """Every finding of every report, one line each, in the order the findings are sorted.

    A finding without a source line is placed at the model's path, with no line number.
    """
    shown = [printable(report) for report in reports]
    lines = [finding_line(report, item) for report in shown for item in report.findings]
    return "".join(line + "\n" for line in lines)


def finding_line(report: Report, item: Finding) -> str:
    if item.location is not None:
        where = f"{display_path(item.location.file)}:{item.location.line}"
    else:
        where = display_path(report.source.path)
    # One line per finding, whatever a model's names contain.
    message = re.sub(r"\r\n|\r|\n", " ", item.message)
    return f"{where}: {item.code} {item.severity.value} {item.rule}: {message}"
