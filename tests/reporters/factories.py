"""Hand-made verdicts for reporter tests, which need no TensorFlow."""

from __future__ import annotations

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict


def verdict(name: str, status: Status, **fields: object) -> VariableVerdict:
    return VariableVerdict(
        name=name,
        path=None,
        trainable=True,
        dtype="float32",
        shape=(2, 2),
        status=status,
        **fields,  # type: ignore[arg-type]
    )
