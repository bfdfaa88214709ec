"""What the user accepts: dead variables allowed on purpose, codes selected or ignored."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import replace

from gradcheck_cli.findings.build import finding_order
from gradcheck_cli.findings.finding import Finding, Severity, Suppression
from gradcheck_cli.findings.names import variables_matching
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import (
    ALLOWED_BY_BASELINE,
    DEAD_VARIABLE_ALLOWED,
    RULES,
    allowed_by_pattern,
    allowed_message,
)


class FailOn(str, enum.Enum):
    """The least severe finding that fails the run."""

    ERROR = "error"
    WARNING = "warning"
    NEVER = "never"

    @property
    def severities(self) -> frozenset[Severity]:
        """The severities of the findings that fail the run."""
        if self is FailOn.NEVER:
            return frozenset()
        if self is FailOn.ERROR:
            return frozenset({Severity.ERROR})
        return frozenset({Severity.ERROR, Severity.WARNING})


def apply_policy(
    report: Report,
    *,
    allow_dead: Mapping[str, str] | Iterable[str] = (),
    baseline: Iterable[str] | None = None,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> Report:
    """The report as the user's configuration reads it.

    `allow_dead`: glob patterns of variable names (or a mapping pattern -> reason); a dead
    variable that matches is reported as allowed (`dead-variable-allowed`) and no longer fails
    the run.
    `baseline`: names of variables that were already dead when the baseline was written (None:
    no baseline is in use).
    `select` / `ignore`: finding codes or prefixes (`GC1`, `GC201`) to keep / drop.
    """
    patterns = (
        dict(allow_dead) if isinstance(allow_dead, Mapping) else dict.fromkeys(allow_dead, "")
    )
    known = set(baseline or ())
    matching = {
        pattern: {v.name for v in variables_matching(report.variables, pattern, report.python_name)}
        for pattern in patterns
    }
    allowed: dict[str, str] = dict(report.allowed)
    for verdict in report.variables:
        if not verdict.dead or verdict.name in allowed or verdict.name in report.suppressed:
            continue
        for pattern, reason in patterns.items():
            if verdict.name in matching[pattern]:
                allowed[verdict.name] = allowed_by_pattern(pattern, reason)
                break
        else:
            if verdict.name in known:
                allowed[verdict.name] = ALLOWED_BY_BASELINE
    everything_allowed = bool(allowed or report.suppressed) and all(
        report.accepted(v.name) or v.name in allowed for v in report.variables if v.dead
    )
    findings = []
    for f in report.findings:
        if f.suppression is not None:
            findings.append(f)
        elif f.variable in allowed:
            findings.append(_accepted(f, allowed[f.variable]))
        elif everything_allowed and RULES[f.code].whole_loss:
            findings.append(_accepted(f, "every dead variable is accepted"))
        else:
            findings.append(f)
    findings += [
        DEAD_VARIABLE_ALLOWED.finding(name=name, why=why, variable=name)
        for name, why in sorted(allowed.items())
        if name not in report.allowed
    ]
    selected = tuple(select)
    ignored = tuple(ignore)
    findings = [
        f
        for f in findings
        if (not selected or f.code.startswith(selected)) and not f.code.startswith(ignored)
    ]
    return replace(
        report,
        findings=tuple(sorted(findings, key=finding_order)),
        allowed=allowed,
        baselined=report.baselined or baseline is not None,
        model_map=report.model_map and report.model_map.accepting(allowed),
    )


def _accepted(item: Finding, why: str) -> Finding:
    """A dead variable's finding, kept for the record but no longer failing the run."""
    suppression = Suppression("external", why, baseline=why == ALLOWED_BY_BASELINE)
    if item.severity is not Severity.ERROR:
        return replace(item, suppression=suppression)
    return replace(
        item,
        severity=Severity.INFO,
        message=allowed_message(item.message),
        suppression=suppression,
    )
