"""Inline suppressions: `# gradcheck: ignore[GC101]` (or a bare `# gradcheck: ignore`) on the line
that creates a variable or on the line of a cut, as ruff's `# noqa` and mypy's `# type: ignore`.
A suppressed finding stays in the report, marked so; a comment that suppresses nothing is told."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gradcheck_cli.findings.finding import Finding, Severity, Suppression
from gradcheck_cli.findings.rules import RULES, UNUSED_SUPPRESSION
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.ignore_comments import IgnoreComment


def apply_ignore_comments(
    findings: Iterable[Finding],
    comments: Iterable[IgnoreComment],
    lines_of: Mapping[str, Iterable[SourceLocation | None]],
) -> tuple[tuple[Finding, ...], dict[str, str]]:
    """The findings with those an ignore comment covers suppressed (no longer failing the
    run, marked in every format), the comments that suppress nothing told (GC008); and the
    dead variables suppressed (every finding of their story is), with why.

    `lines_of`: per variable name, the lines that speak for it besides a finding's own (where it
    is created, its cuts): a comment on any of them suppresses that variable's findings."""
    at: dict[tuple[str, int], list[IgnoreComment]] = {}
    comments = list(comments)
    for comment in comments:
        at.setdefault((comment.file, comment.line), []).append(comment)
    used: set[IgnoreComment] = set()
    suppressed: dict[str, str] = {}
    left: set[str] = set()  # variables with a finding told in their story that no comment covers
    result = []
    for item in findings:
        places = [item.location]
        if item.variable is not None:
            places += list(lines_of.get(item.variable, ()))
        matching = [
            comment
            for place in places
            if place is not None
            for comment in at.get((place.file, place.line), ())
            if comment.covers(item.code)
        ]
        # The variable whose story this finding tells, if it tells one.
        story = item.variable if RULES[item.code].told_in_story else None
        if not matching:
            if story is not None:
                left.add(story)
            result.append(item)
            continue
        used.update(matching)
        comment = matching[0]
        why = f"`# {comment.text}` at {comment.where}"
        if story is not None:
            suppressed.setdefault(story, why)
        result.append(_suppressed(item, why))
    for comment in comments:
        if comment not in used:
            result.append(
                UNUSED_SUPPRESSION.finding(
                    comment=comment.text,
                    location=SourceLocation(comment.file, comment.line),
                )
            )
    # A variable cut two ways (GC101 and GC102) is suppressed only if both are.
    return tuple(result), {name: why for name, why in suppressed.items() if name not in left}


def _suppressed(item: Finding, why: str) -> Finding:
    """Kept for the record, as information: it no longer fails the run."""
    message = f"{item.message} (suppressed)" if item.severity is not Severity.INFO else item.message
    return replace(
        item, severity=Severity.INFO, message=message, suppression=Suppression("inSource", why)
    )
