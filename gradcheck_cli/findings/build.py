"""Turn the analysis, loader notes and verification into findings, sorted for stable output."""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck_cli.analysis.verdicts import Analysis, Concern, ConcernKind, Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.fixes import blocker_fix, python_name, variable_fix
from gradcheck_cli.findings.report import Verification
from gradcheck_cli.findings.rules import DEAD_VARIABLE_CODE_BY_REASON, RULES
from gradcheck_cli.findings.source import SourceLines, assignment
from gradcheck_cli.graph.model import SourceLocation

_CONCERN_CODES = {
    ConcernKind.STOP_GRADIENT_UNUSED: "GC201",
    ConcernKind.STOP_GRADIENT_REDUNDANT: "GC202",
    ConcernKind.STOP_GRADIENT_NO_EFFECT: "GC203",
    ConcernKind.CUT_IN_BRANCH: "GC205",
    ConcernKind.CUT_ON_SOME_PATHS: "GC204",
    ConcernKind.TRAINED_ONLY_BY_REGULARIZER: "GC206",
}


@dataclass(frozen=True)
class Context:
    """What the loader knew beyond the graph."""

    notes: tuple[str, ...] = ()
    verification: Verification | None = None
    # Where and why a loss that could not be traced left TensorFlow.
    left_tensorflow: tuple[SourceLocation | None, str] | None = None
    # False for a SavedModel saved without debug info: no source lines at all.
    located: bool = True


def finding(code: str, message: str, **fields: object) -> Finding:
    rule = RULES[code]
    return Finding(code=code, rule=rule.name, severity=rule.severity, message=message, **fields)  # type: ignore[arg-type]


def build_findings(
    analysis: Analysis, context: Context, source: SourceLines
) -> tuple[Finding, ...]:
    findings = [finding("GC001", note) for note in context.notes]
    if not context.located:
        findings.append(
            finding(
                "GC005",
                "this SavedModel has no debug info, so cuts are located by op and name scope; "
                "save it with tf.saved_model.SaveOptions(save_debug_info=True) to get source lines",
            )
        )
    findings += _verification_findings(context.verification, analysis.verdicts)
    if context.left_tensorflow is not None:
        location, reason = context.left_tensorflow
        findings.append(
            finding(
                "GC109",
                f"the loss cannot be traced into a graph ({reason}): its value leaves "
                "TensorFlow here, and the gradient cannot follow it",
                hint=RULES["GC109"].use_instead.splitlines()[0],
                location=location,
            )
        )
    for verdict in analysis.verdicts:
        findings += _dead_variable_findings(verdict, source)
    trainable = [v for v in analysis.verdicts if v.status is not Status.FROZEN]
    if trainable and all(v.dead for v in trainable):
        findings.append(
            finding("GC110", "no trainable variable can receive gradient from this loss")
        )
    findings += [_concern_finding(concern, source) for concern in analysis.concerns]
    return tuple(sorted(findings, key=finding_order))


def _dead_variable_findings(verdict: VariableVerdict, source: SourceLines) -> list[Finding]:
    if verdict.status is Status.UNUSED:
        return [
            finding(
                "GC108",
                f"{verdict.name}{_attribute(verdict)} never reaches the loss: "
                f"{verdict.explanation}",
                hint=variable_fix(verdict, source),
                variable=verdict.name,
                location=verdict.location,
            )
        ]
    if verdict.status is not Status.BLOCKED:
        return []
    name = python_name(verdict, source)
    found = []
    for blocker in verdict.blockers:
        if blocker.reason is Reason.LEFT_TENSORFLOW:
            continue  # the GC109 finding says it once for the whole loss
        found.append(
            finding(
                DEAD_VARIABLE_CODE_BY_REASON[blocker.reason.value],
                f"{verdict.name} gets no gradient through {blocker.op_type} "
                f"{blocker.op!r}: {blocker.message}",
                hint=blocker_fix(blocker, name),
                variable=verdict.name,
                op=blocker.op,
                location=blocker.location,
            )
        )
    return found


def _attribute(verdict: VariableVerdict) -> str:
    """` (model.proj.kernel)`: the attribute that holds it, when that says more than its name."""
    if verdict.path and verdict.path != verdict.name:
        return f" ({verdict.path})"
    return ""


def _concern_finding(concern: Concern, source: SourceLines) -> Finding:
    code = _CONCERN_CODES[concern.kind]
    messages = {
        ConcernKind.STOP_GRADIENT_UNUSED: _unused_stop_message(source.line(concern.location)),
        ConcernKind.STOP_GRADIENT_REDUNDANT: "this tf.stop_gradient is redundant: its input gets "
        "no gradient anyway, the path is already cut before it",
        ConcernKind.STOP_GRADIENT_NO_EFFECT: "this tf.stop_gradient has no effect: no trainable "
        "variable is upstream of it",
        ConcernKind.CUT_ON_SOME_PATHS: f"{', '.join(concern.variables)} trains through another "
        f"path, but this {concern.op_type} cuts one of its paths: {concern.detail}",
        ConcernKind.TRAINED_ONLY_BY_REGULARIZER: f"{', '.join(concern.variables)} is reached "
        f"only through a regularizer: {concern.detail}; the loss itself never trains it, "
        "training only decays it",
        ConcernKind.CUT_IN_BRANCH: f"{', '.join(concern.variables) or 'an input'}: "
        f"{concern.detail}",
    }
    return finding(
        code,
        messages[concern.kind],
        variable=concern.variables[0] if concern.variables else None,
        op=concern.op,
        location=concern.location,
    )


def _unused_stop_message(code: str | None) -> str:
    """Name the unused result, and the unstopped tensor the code goes on with, from its line."""
    rewrite = assignment(code)
    if rewrite is None or rewrite[0] == rewrite[1]:
        return "this tf.stop_gradient has no effect: nothing uses its result"
    target, argument = rewrite
    if argument.isidentifier():
        return (
            f"this tf.stop_gradient has no effect: nothing uses its result {target} (the code "
            f"goes on with {argument} itself)"
        )
    return f"this tf.stop_gradient has no effect: nothing uses its result {target}"


def _verification_findings(
    verification: Verification | None, verdicts: tuple[VariableVerdict, ...]
) -> list[Finding]:
    if verification is None:
        return []
    if verification.error is not None:
        return [
            finding(
                "GC004", f"TensorFlow's own gradients could not be computed: {verification.error}"
            )
        ]
    if verification.agrees:
        compared = sum(1 for v in verdicts if v.status is not Status.FROZEN)
        return [
            finding(
                "GC003",
                f"TensorFlow's own gradients ({verification.method}) agree with all "
                f"{compared} verdicts",
            )
        ]
    return [
        finding(
            "GC002",
            f"TensorFlow says {d.tensorflow!r} for {d.variable}, gradcheck says {d.gradcheck!r}",
            variable=d.variable,
        )
        for d in verification.disagreements
    ]


def finding_order(item: Finding) -> tuple[str, str, str, int, str]:
    location = item.location
    return (
        item.code,
        item.variable or "",
        location.file if location else "",
        location.line if location else 0,
        item.message,
    )
