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
class Suppression:
    """Why a finding no longer fails the run, as SARIF words it: `inSource` for a
    `# gradcheck: ignore` comment, `external` for an allow-dead pattern or the baseline."""

    kind: str
    justification: str
    baseline: bool = False  # accepted because the baseline lists it


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
    suppression: Suppression | None = None
