"""Findings: plain, ordered values with stable codes."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gradcheck_cli.graph.model import SourceLocation


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, order=True)
class Finding:
    code: str
    rule: str
    severity: Severity
    message: str
    hint: str | None = None
    variable: str | None = None
    op: str | None = None
    location: SourceLocation | None = None
