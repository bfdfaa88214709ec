"""Compare gradcheck's verdicts with TensorFlow's own gradients (`--verify`)."""

from __future__ import annotations

from collections.abc import Mapping

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.findings.report import Disagreement, Verification
from gradcheck_cli.graph.model import TensorFlowVerdict


def compare(
    verdicts: tuple[VariableVerdict, ...],
    tensorflow: Mapping[str, TensorFlowVerdict] | None,
    error: str | None,
    method: str,
) -> Verification:
    """Where gradcheck's dead/alive verdicts differ from TensorFlow's own gradients."""
    if tensorflow is None:
        return Verification(method=method, error=error or "TensorFlow gave no verdict")
    disagreements = []
    for verdict in verdicts:
        if verdict.status is Status.FROZEN or verdict.name not in tensorflow:
            continue
        said = tensorflow[verdict.name]
        if said.dead != verdict.dead:
            disagreements.append(Disagreement(verdict.name, verdict.status.value, said.value))
    return Verification(method=method, disagreements=tuple(disagreements), error=error)
