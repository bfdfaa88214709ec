"""Turn the analysis, loader notes and verification into findings, sorted for stable output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gradcheck_cli.analysis.verdicts import Analysis, Concern, ConcernKind, Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.report import Verification
from gradcheck_cli.findings.rules import (
    COPY_NEVER_TRAINED,
    FROZEN_VARIABLE_GIVEN_TO_OPTIMIZER,
    GRAPH_NOT_FULLY_MODELLED,
    HARMLESS_LEAVE_SEVERITY,
    KERAS_TRAINING_TRAINS_NOTHING,
    LOSS_INDEPENDENT_OF_VARIABLES,
    RULE_BY_CONCERN,
    RULE_BY_REASON,
    SAVED_MODEL_WITHOUT_SOURCE_LINES,
    TRAINABLE_VARIABLE_NOT_IN_CHECKED_STEP,
    VALUE_LEAVES_TENSORFLOW,
    VARIABLE_NEVER_REACHES_LOSS,
    VARIABLE_READ_BUT_NOT_REQUESTED,
    VARIABLES_LEFT_OUT,
    VERIFICATION_AGREES,
    VERIFICATION_DISAGREES,
    VERIFICATION_DISAGREES_NEXT,
    VERIFICATION_FAILED,
    idle_training_fix,
    unlisted_fix,
)
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation, is_trainable_dtype

if TYPE_CHECKING:  # only a run's result holds them: a SavedModel's check loads no worker types
    from gradcheck_cli.worker.protocol import IdleTraining


@dataclass(frozen=True)
class Context:
    """What the loader knew beyond the graph."""

    notes: tuple[str, ...] = ()
    verification: Verification | None = None
    # Where and why a loss that could not be traced left TensorFlow.
    left_tensorflow: tuple[SourceLocation | None, str] | None = None
    # False for a SavedModel saved without debug info: no source lines at all.
    located: bool = True
    # `gradcheck run`: the variables were the ones the script itself asked gradients for.
    requested: bool = False
    # `gradcheck run`: trainable variables that no gradient request of the script differentiates.
    never_requested: tuple[str, ...] = ()
    # `gradcheck run`: the script's gradient requests that the run stopped before reaching.
    unreached: tuple[SourceLocation, ...] = ()
    # `gradcheck run`: trainable variables this request's loss reads, that no request lists.
    read_not_requested: tuple[str, ...] = ()
    # `gradcheck run`: Keras training calls on a model with no trainable weight.
    idle_training: tuple[IdleTraining, ...] = ()
    # Trainable variables the script created that the loader left out: (name, why).
    left_out: tuple[tuple[str, str], ...] = ()
    # `gradcheck run`: trainable variables no request lists that hold the values of one that a
    # request lists: (name, the requested variable's name).
    copies: tuple[tuple[str, str], ...] = ()
    # (path, text) of files the check read as holding that text (a fix checked before it is
    # written): the report quotes these texts.
    texts: tuple[tuple[str, str], ...] = ()


def build_findings(
    analysis: Analysis,
    context: Context,
    source: SourceLines,
    fixes: Mapping[str, str],
    told: Mapping[str, tuple[Finding, ...]] | None = None,
) -> tuple[Finding, ...]:
    """Every finding, sorted. `fixes`: the fix of each dead variable, the hint of each of its
    findings; `told`: per variable, findings that replace its own findings about the same ops
    (an intended cut told as such, a quantizer's variables)."""
    findings = [GRAPH_NOT_FULLY_MODELLED.finding(note=note) for note in context.notes]
    findings += _left_out_findings(context.left_out)
    if not context.located:
        findings.append(SAVED_MODEL_WITHOUT_SOURCE_LINES.finding())
    findings += _verification_findings(context.verification, analysis.verdicts)
    if context.left_tensorflow is not None:
        findings.append(_left_tensorflow_finding(*context.left_tensorflow, analysis.verdicts))
    for verdict in analysis.verdicts:
        instead = (told or {}).get(verdict.name, ())
        replaced = {f.op for f in instead}
        findings += [f for f in _dead_variable_findings(verdict, fixes) if f.op not in replaced]
        findings += instead
    trainable = [v for v in analysis.verdicts if v.status is not Status.FROZEN]
    if trainable and all(v.dead for v in trainable):
        loss_dtype = analysis.loss_dtype
        non_float = loss_dtype if loss_dtype and not is_trainable_dtype(loss_dtype) else None
        findings.append(LOSS_INDEPENDENT_OF_VARIABLES.finding(loss_dtype=non_float))
    findings += [
        _concern_finding(concern, source)
        for concern in analysis.concerns
        if not _a_librarys_own_cut(concern)
    ]
    findings += _request_findings(analysis, context)
    return tuple(sorted(findings, key=finding_order))


def _left_out_findings(left_out: Sequence[tuple[str, str]]) -> list[Finding]:
    """One GC009 finding per reason, naming the variables left out for it."""
    by_reason: dict[str, list[str]] = {}
    for name, why in left_out:
        by_reason.setdefault(why, []).append(name)
    return [
        VARIABLES_LEFT_OUT.finding(names=tuple(names), why=why) for why, names in by_reason.items()
    ]


def _left_tensorflow_finding(
    location: SourceLocation | None, reason: str, verdicts: tuple[VariableVerdict, ...]
) -> Finding:
    """GC109: an error if some variable is cut where the value leaves TensorFlow, else an info
    (TensorFlow's tape says the value that left carried no gradient the loss needs)."""
    from gradcheck_cli.findings.advice.role_fixes import left_tensorflow_fix

    left = [b for v in verdicts for b in v.blockers if b.reason is Reason.LEFT_TENSORFLOW]
    kills = bool(left)
    found = VALUE_LEAVES_TENSORFLOW.finding(
        reason=reason,
        harmless=not kills,
        hint=left_tensorflow_fix(left[0]) if left else None,  # the dead variables' own fix
        location=location,
    )
    return found if kills else replace(found, severity=HARMLESS_LEAVE_SEVERITY)


def _request_findings(analysis: Analysis, context: Context) -> list[Finding]:
    """What `gradcheck run` adds: variables no request trains, frozen ones handed to one."""
    found = []
    if context.never_requested:
        found.append(
            TRAINABLE_VARIABLE_NOT_IN_CHECKED_STEP.finding(
                names=context.never_requested, unreached=context.unreached
            )
        )
    if context.read_not_requested:
        names = context.read_not_requested
        found.append(VARIABLE_READ_BUT_NOT_REQUESTED.finding(names=names, hint=unlisted_fix(names)))
    if context.copies:
        found.append(COPY_NEVER_TRAINED.finding(copies=context.copies))
    for idle in context.idle_training:
        found.append(
            KERAS_TRAINING_TRAINS_NOTHING.finding(
                api=idle.api,
                model=idle.model,
                frozen=idle.frozen,
                hint=idle_training_fix(idle.model),
                location=idle.location,
            )
        )
    frozen = tuple(v.name for v in analysis.verdicts if v.status is Status.FROZEN)
    if context.requested and frozen:
        found.append(FROZEN_VARIABLE_GIVEN_TO_OPTIMIZER.finding(names=frozen))
    return found


def _dead_variable_findings(verdict: VariableVerdict, fixes: Mapping[str, str]) -> list[Finding]:
    if verdict.status is Status.UNUSED:
        return [
            VARIABLE_NEVER_REACHES_LOSS.finding(
                verdict=verdict,
                hint=fixes.get(verdict.name),
                variable=verdict.name,
                location=verdict.location,
            )
        ]
    if verdict.status is not Status.BLOCKED:
        return []
    found = []
    for blocker in verdict.blockers:
        rule = RULE_BY_REASON[blocker.reason]
        if rule.whole_loss:
            continue  # its one finding speaks for the whole loss
        found.append(
            rule.finding(
                name=verdict.name,
                op_type=blocker.op_type,
                op_name=blocker.op,
                detail=blocker.message,
                hint=fixes.get(verdict.name),
                variable=verdict.name,
                op=blocker.op,
                location=blocker.location,
            )
        )
    return found


def _a_librarys_own_cut(concern: Concern) -> bool:
    """A stop_gradient on one path of a variable that trains, made inside a library's code
    that the user's line only called (Keras's batch normalization and `tf.nn.moments` stop
    the gradient of the mean inside the variance): the library's design, nothing the user
    wrote or can change there."""
    location = concern.location
    inside = location is not None and location.inside is not None
    partial = concern.kind is ConcernKind.CUT_ON_SOME_PATHS
    return partial and inside and concern.op_type == "StopGradient"


def _concern_finding(concern: Concern, source: SourceLines) -> Finding:
    from gradcheck_cli.findings.advice.role_fixes import dead_term_fix

    dead_term = concern.kind is ConcernKind.DEAD_LOSS_TERM
    return RULE_BY_CONCERN[concern.kind].finding(
        concern=concern,
        hint=dead_term_fix(concern.op_type) if dead_term else None,
        line=source.line(concern.location),
        variable=concern.variables[0] if concern.variables else None,
        op=concern.op,
        location=concern.location,
    )


def _verification_findings(
    verification: Verification | None, verdicts: tuple[VariableVerdict, ...]
) -> list[Finding]:
    if verification is None:
        return []
    if verification.error is not None:
        return [VERIFICATION_FAILED.finding(error=verification.error)]
    if verification.agrees:
        compared = sum(1 for v in verdicts if v.status is not Status.FROZEN)
        return [VERIFICATION_AGREES.finding(method=verification.method, compared=compared)]
    return [
        VERIFICATION_DISAGREES.finding(
            tensorflow=d.tensorflow,
            name=d.variable,
            gradcheck=d.gradcheck,
            variable=d.variable,
            hint=VERIFICATION_DISAGREES_NEXT,
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
