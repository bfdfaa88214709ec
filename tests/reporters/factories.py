"""Hand-made verdicts for reporter tests, which need no TensorFlow."""

from __future__ import annotations

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.graph.model import SourceLocation, Variable


def verdict(
    name: str,
    status: Status,
    *,
    location: SourceLocation | None = None,
    path: str | None = None,
    **fields: object,
) -> VariableVerdict:
    variable = Variable(name, True, "float32", (2, 2), source=None, path=path, location=location)
    return VariableVerdict(variable, status, **fields)  # type: ignore[arg-type]
