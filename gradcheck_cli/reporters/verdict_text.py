"""The verdict headline and a route shortened for reading, in plain words for every reporter."""

from __future__ import annotations

from gradcheck_cli.analysis.verdicts import PathStep
from gradcheck_cli.findings.report import Report

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


def verdict_parts(report: Report) -> tuple[str, str]:
    """The verdict, plain: the headline (`1 of 4 trainable variables is dead`) and the counts."""
    summary = report.summary
    counts = ", ".join(f"{summary[k]} {k}" for k in ("ok", "blocked", "unused", "frozen"))
    if report.allowed:
        counts += f"; {len(report.allowed)} dead but allowed"
    dead = len(report.dead)
    intended = len(report.untrained) - dead
    if intended:
        return f"{dead} dead, {intended} {NOT_TRAINED_HERE}", counts
    if dead:
        verb = "is" if dead == 1 else "are"
        return f"{dead} of {summary['trainable']} trainable variables {verb} dead", counts
    if report.allowed:
        return "no dead trainable variable beyond those allowed", counts
    return "every trainable variable gets gradient", counts
