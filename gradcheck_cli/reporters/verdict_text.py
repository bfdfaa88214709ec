"""The verdict headline, a shortened route and where a cut is, in plain words for every reporter."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Unreached, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.policy import FailOn
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.findings.rules import RULES, why_unused
from gradcheck_cli.reporters.grouping import plural

# Ops that only pass a value along; long runs of them are collapsed in a path.
_QUIET_OPS = frozenset(
    {
        "Identity",
        "IdentityN",
        "ReadVariableOp",
        "_Arg",
        "Reshape",
        "Squeeze",
        "ExpandDims",
        "Enter",
        "Exit",
        "Switch",
        "Merge",
    }
)
_LONG_RUN = 3

NOT_TRAINED_HERE = "not trained by this loss (looks intended)"
"""How the report calls variables whose cut looks intended (`Report.intended`)."""


def route_items(route: tuple[PathStep, ...]) -> list[PathStep | int]:
    """The steps of a route worth showing, between the variable and the loss (both left out):
    pass-through ops dropped, a long run without a cut kept as its ends and a count between."""
    steps = [s for s in route[1:-1] if s.cut is not None or s.op_type not in _QUIET_OPS]
    items: list[PathStep | int] = []
    run: list[PathStep] = []
    for step in [*steps, None]:
        if step is not None and step.cut is None:
            run.append(step)
            continue
        if len(run) > _LONG_RUN + 1:
            items += [run[0], len(run) - 2, run[-1]]
        else:
            items += run
        run = []
        if step is not None:
            items.append(step)
    return items


def failing(report: Report, fail_on: FailOn) -> tuple[Finding, ...]:
    """The findings that fail the run under `fail_on` besides the dead variables themselves
    (which the headline counts): warnings with `--fail-on warning`, a `--verify` disagreement."""
    dead = {verdict.name for verdict in report.dead}

    def counted(item: Finding) -> bool:  # a dead variable's own finding, or the loss's
        rule = RULES[item.code]
        return bool(dead) and (rule.whole_loss or (rule.told_in_story and item.variable in dead))

    return tuple(
        item
        for item in report.findings
        if item.severity in fail_on.severities and not counted(item)
    )


def _failed_by(findings: tuple[Finding, ...]) -> str:
    """`2 warnings (GC201, GC208) with --fail-on warning`: what failed the run, by severity."""
    parts = []
    for severity in (Severity.ERROR, Severity.WARNING):
        chosen = [item for item in findings if item.severity is severity]
        if chosen:
            codes = ", ".join(sorted({item.code for item in chosen}))
            noun = severity.value if len(chosen) == 1 else f"{severity.value}s"
            parts.append(f"{len(chosen)} {noun} ({codes})")
    warned = any(item.severity is Severity.WARNING for item in findings)
    return " and ".join(parts) + (" with --fail-on warning" if warned else "")


def verdict_parts(report: Report, fail_on: FailOn = FailOn.ERROR) -> tuple[str, str]:
    """The verdict, plain: the headline (`1 of 4 trainable variables is dead`, or what else
    fails the run under `fail_on`: `failed: 2 warnings (GC208) with --fail-on warning`) and the
    counts."""
    counts = _counts((report,))
    headline = _headline(report)
    others = failing(report, fail_on)
    if not others:
        return headline, counts
    if report.dead:
        return f"{headline}; also failed by {_failed_by(others)}", counts
    return f"failed: {_failed_by(others)}", counts


def _headline(report: Report) -> str:
    summary = report.summary
    dead = len(report.dead)
    intended = len(report.untrained) - dead
    if intended:
        return f"{dead} dead, {intended} {NOT_TRAINED_HERE}"
    if dead:
        verb = "is" if dead == 1 else "are"
        return f"{dead} of {summary['trainable']} trainable variables {verb} dead"
    if report.allowed or report.suppressed:
        how = " or ".join(
            word
            for word, kept in (("allowed", report.allowed), ("suppressed", report.suppressed))
            if kept
        )
        return f"no dead trainable variable beyond those {how}"
    return "every trainable variable gets gradient"


def _counts(reports: Sequence[Report]) -> str:
    """`3 ok, 1 blocked, 0 unused, 0 frozen; 1 dead but allowed`, summed over `reports`."""
    summed = {
        key: sum(report.summary[key] for report in reports)
        for key in ("ok", "blocked", "unused", "frozen")
    }
    counts = ", ".join(f"{count} {key}" for key, count in summed.items())
    allowed = sum(len(report.allowed) for report in reports)
    if allowed:
        counts += f"; {allowed} dead but allowed"
    suppressed = sum(len(report.suppressed) for report in reports)
    if suppressed:
        counts += f"; {suppressed} suppressed"
    return counts


def total_parts(
    reports: Sequence[Report], unchecked: int = 0, fail_on: FailOn = FailOn.ERROR
) -> tuple[str, str]:
    """The verdict of several models (or gradient requests) checked in one run, plain: the
    headline (`3 dead variables in 2 of 4 models`) and the counts summed, as one model's
    verdict_parts words them; `unchecked` models could not be checked (their errors are told
    apart)."""
    noun = "gradient request" if all(r.source.kind == "run" for r in reports) else "model"
    checked = plural(len(reports), noun)
    dead = sum(len(report.dead) for report in reports)
    others = [item for report in reports for item in failing(report, fail_on)]
    intended = sum(len(report.untrained) - len(report.dead) for report in reports)
    if dead:
        having = sum(1 for report in reports if report.dead)
        headline = f"{plural(dead, 'dead variable')} in {having} of {checked}"
        if others:
            headline += f"; also failed by {_failed_by(tuple(others))}"
    elif others:
        having = sum(1 for report in reports if failing(report, fail_on))
        headline = f"failed: {_failed_by(tuple(others))}, in {having} of {checked}"
    elif intended:
        headline = f"no dead variable in {checked}"
    elif any(report.allowed or report.suppressed for report in reports):
        how = " or ".join(
            word
            for word, kept in (
                ("allowed", any(report.allowed for report in reports)),
                ("suppressed", any(report.suppressed for report in reports)),
            )
            if kept
        )
        headline = f"no dead trainable variable beyond those {how}, in {checked}"
    else:
        every = f"both {noun}s" if len(reports) == 2 else f"all {checked}"
        headline = f"every trainable variable gets gradient, in {every}"
    if intended:  # a teacher under tf.stop_gradient: warned about, not dead (as one model's)
        whose = "its" if intended == 1 else "their"
        headline += f"; {intended} not trained by {whose} loss (looks intended)"
    if unchecked:
        headline += f"; {plural(unchecked, 'more model')} could not be checked"
    return headline, _counts(reports)


def request_label(source: SourceInfo) -> str:
    """What one line about a report names: the model; in `gradcheck run`, each gradient request
    as the line that made it and its call (`train.py:41: GradientTape.gradient`)."""
    path = display_path(source.path)
    if source.kind != "run" or source.request is None:
        return path
    api, where = source.request.api, source.request.location
    if where is None:
        return f"{path}: {api}"
    request_file = display_path(where.file)
    if request_file == path or request_file.startswith(f"{path}#"):  # a notebook's cell
        return f"{request_file}:{where.line}: {api}"
    return f"{path}: {api} at {request_file}:{where.line}"


def fixable_text(report: Report, command: str | None = None) -> str | None:
    """The hint that `--fix` can write the fix of some dead variables, as ruff tells its
    fixable findings; None when it can write none. `command`: the command that writes them,
    when it is not this one again with --fix ("": none to offer)."""
    count = len(report.fixable)
    if not count or command == "":
        return None
    which = "its fix" if count == 1 else "their fixes"
    how = f"`{command}` writes {which}" if command else f"run it again with --fix to write {which}"
    return (
        f"{plural(count, 'dead variable')} can be fixed by gradcheck: {how} (--diff shows the "
        "change first)"
    )


_READ_ELSEWHERE = {Unreached.NOT_READ_BY_TAPE, Unreached.FROZEN_BEFORE_TRACING}
_READ_ELSEWHERE |= {Unreached.READ_IN_DATASET, Unreached.ASSIGNED_AWAY, Unreached.CREATED_AGAIN}
_READ_ELSEWHERE |= {Unreached.BEHIND_PYTHON_FUNCTION}


def unused_layer_reason(first: VariableVerdict) -> str:
    """Why a layer's weights never reach the loss, in the words of a layer."""
    if first.unreached is Unreached.READ_NOT_REACHING:
        return "its output is not used by this loss: nothing the loss computes depends on it"
    if first.unreached in _READ_ELSEWHERE:
        return f"never reaches the loss: {why_unused(first)}"
    if first.unreached is Unreached.CALLED_NOT_READ:
        return (
            "called in this loss's forward pass, but its call never reads its weights: a value "
            "computed from them in build() or __init__ is computed once, a constant to the loss"
        )
    return "not called in this loss's forward pass: the loss never reads its weights"


def group_unused_reason(members: Sequence[VariableVerdict]) -> str:
    """Why a group of unused variables never reaches the loss: in the words of a layer when
    every one is a layer's weight, else the first one's own reason."""
    first = members[0]
    if all("/" in v.name for v in members):
        return unused_layer_reason(first)
    return f"never reaches the loss: {why_unused(first) or ''}"


def written_for(name: str) -> str:
    """A group's fix, written with its first member's names."""
    return f"written for {name}: the same for each, with its own name"


def cut_place(blocker: Blocker) -> str:
    """Where a cut is: its line (and the library a stop_gradient came from), else its op and
    name scope; and the function it is in."""
    if blocker.location is not None:
        where = f"{display_path(blocker.location.file)}:{blocker.location.line}"
        # Which library made a stop_gradient the user's line only called (tf.nn.moments's).
        if blocker.location.inside and blocker.reason is Reason.STOP_GRADIENT:
            where = f"{where}, inside {blocker.location.inside}"
    else:
        scope = blocker.op.rpartition("/")[0]
        where = f"op {blocker.op}" + (f" in name scope {scope}" if scope else "")
    if blocker.function is not None:
        where += f" in function {function_name(blocker.function)}"
    return where


def function_name(name: str) -> str:
    """`__inference_bucket_ids_123` -> `bucket_ids`, the name the user gave the function."""
    return re.sub(r"_\d+$", "", name.removeprefix("__inference_"))
