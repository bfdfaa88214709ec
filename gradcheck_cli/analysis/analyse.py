"""Decide each variable's status from the two reachability passes, and find the cuts of the dead."""

from __future__ import annotations

from gradcheck_cli.analysis.cuts import CutFinder
from gradcheck_cli.analysis.reachability import Reachability
from gradcheck_cli.analysis.verdicts import Blocker, Status, VariableVerdict
from gradcheck_cli.graph.model import Program, TensorRef, Variable

_ASSIGN_OPS = frozenset(
    {
        "Assign",
        "AssignAdd",
        "AssignSub",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
    }
)


def analyse(program: Program) -> tuple[VariableVerdict, ...]:
    """One verdict per candidate variable, in the program's variable order."""
    gradient = Reachability(program, gradient=True).top_masks()
    structural_pass = Reachability(program, gradient=False)
    structural = structural_pass.top_masks()
    finder = CutFinder(program, structural_pass)
    verdicts = []
    for variable in program.variables:
        source = variable.source
        explanation = None
        blockers: tuple[Blocker, ...] = ()
        if not variable.trainable:
            status = Status.FROZEN
        elif source is None:
            status = Status.UNUSED
            explanation = "the loss function never reads it"
        elif gradient.get(source, 0):
            status = Status.OK
        elif structural.get(source, 0):
            status = Status.BLOCKED
            blockers = tuple(finder.cuts(source))
        else:
            status = Status.UNUSED
            explanation = _why_unused(program, source)
        verdicts.append(_verdict(variable, status, blockers, explanation))
    return tuple(verdicts)


def _why_unused(program: Program, source: TensorRef) -> str:
    body = program.top_body
    readers = [n for n in body.nodes.values() if source in n.inputs]
    if readers and all(n.op_type in _ASSIGN_OPS for n in readers):
        return "it is only used by an assignment, which feeds nothing the loss reads"
    if readers:
        return "it is read, but nothing computed from it reaches the loss"
    return "the loss function receives it but never reads it"


def _verdict(
    variable: Variable, status: Status, blockers: tuple[Blocker, ...], explanation: str | None
) -> VariableVerdict:
    return VariableVerdict(
        name=variable.name,
        path=variable.path,
        trainable=variable.trainable,
        dtype=variable.dtype,
        shape=variable.shape,
        status=status,
        blockers=blockers,
        location=variable.location,
        explanation=explanation,
    )
