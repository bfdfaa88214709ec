"""Turn verdicts and loader notes into findings, sorted so output is deterministic."""

from __future__ import annotations

from collections.abc import Iterable

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.report import Verification
from gradcheck_cli.findings.rules import RULES
from gradcheck_cli.graph.model import SourceLocation


def _finding(code: str, message: str, **fields: object) -> Finding:
    rule = RULES[code]
    return Finding(code=code, rule=rule.name, severity=rule.severity, message=message, **fields)  # type: ignore[arg-type]


def build_findings(
    verdicts: Iterable[VariableVerdict],
    notes: Iterable[str],
    verification: Verification | None = None,
    left_tensorflow: tuple[SourceLocation | None, str] | None = None,
) -> tuple[Finding, ...]:
    """`left_tensorflow`: where and why a loss that could not be traced left TensorFlow."""
    verdicts = tuple(verdicts)
    findings = [_finding("GC001", note) for note in notes]
    if left_tensorflow is not None:
        location, reason = left_tensorflow
        findings.append(
            _finding(
                "GC103",
                f"the loss cannot be traced into a graph ({reason}): its value leaves "
                "TensorFlow, and the gradient cannot follow it",
                hint=RULES["GC103"].use_instead,
                location=location,
            )
        )
    findings += _verification_findings(verification, len(verdicts))
    for verdict in verdicts:
        if verdict.status is Status.BLOCKED:
            first = verdict.blockers[0] if verdict.blockers else None
            cut = f": {first.op_type} {first.op!r} ({first.message})" if first else ""
            more = (
                f" and {len(verdict.blockers) - 1} more cut(s)" if len(verdict.blockers) > 1 else ""
            )
            findings.append(
                _finding(
                    "GC101",
                    f"{verdict.name} gets no gradient from the loss: every path is cut{cut}{more}",
                    hint=RULES["GC101"].use_instead.splitlines()[0],
                    variable=verdict.name,
                    op=first.op if first else None,
                    location=first.location if first else verdict.location,
                )
            )
        elif verdict.status is Status.UNUSED:
            findings.append(
                _finding(
                    "GC102",
                    f"{verdict.name} never reaches the loss: {verdict.explanation}",
                    hint=RULES["GC102"].use_instead,
                    variable=verdict.name,
                    location=verdict.location,
                )
            )
    trainable = [v for v in verdicts if v.status is not Status.FROZEN]
    if trainable and all(v.dead for v in trainable):
        findings.append(
            _finding("GC104", "no trainable variable can receive gradient from this loss")
        )
    return tuple(sorted(findings, key=_order))


def _verification_findings(verification: Verification | None, count: int) -> list[Finding]:
    if verification is None:
        return []
    if verification.error is not None:
        return [
            _finding(
                "GC004", f"TensorFlow's own gradients could not be computed: {verification.error}"
            )
        ]
    if verification.agrees:
        return [
            _finding(
                "GC003",
                f"TensorFlow's own gradients ({verification.method}) agree with all "
                f"{count} verdicts",
            )
        ]
    return [
        _finding(
            "GC002",
            f"TensorFlow says {d.tensorflow!r} for {d.variable}, gradcheck says {d.gradcheck!r}",
            variable=d.variable,
        )
        for d in verification.disagreements
    ]


def _order(finding: Finding) -> tuple:
    location = finding.location
    return (
        finding.code,
        finding.variable or "",
        (location.file, location.line) if location else ("", 0),
        finding.message,
    )
