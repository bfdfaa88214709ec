"""Hand-made verdicts for reporter tests, which need no TensorFlow."""

from __future__ import annotations

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.graph.model import SourceLocation, TensorRef, Variable


def verdict(
    name: str,
    status: Status,
    *,
    location: SourceLocation | None = None,
    path: str | None = None,
    source: TensorRef | None = None,
    **fields: object,
) -> VariableVerdict:
    """A verdict on a float32 [2, 2] variable; `source`: where it enters the loss function."""
    variable = Variable(name, True, "float32", (2, 2), source=source, path=path, location=location)
    return VariableVerdict(variable, status, **fields)  # type: ignore[arg-type]
