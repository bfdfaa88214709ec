"""Which variables a name the user types means: every form a report prints."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from gradcheck_cli.analysis.verdicts import VariableVerdict


def variables_named(verdicts: Iterable[VariableVerdict], name: str) -> tuple[VariableVerdict, ...]:
    """The variables `name` means, most precise form first: the full name or Keras path; the
    last part of the name when one variable has it (`weights_i`); a layer or name scope, for all
    of its weights (`dense_1`, `teacher/conv1`)."""
    candidates = tuple(verdicts)
    exact = tuple(v for v in candidates if name in (v.name, v.path))
    if exact:
        return exact
    short = tuple(v for v in candidates if v.name.rpartition("/")[2] == name)
    if len(short) == 1:
        return short
    scoped = tuple(
        v for v in candidates if v.name.startswith(f"{name}/") or f"/{name}/" in f"/{v.name}"
    )
    return scoped


def matches_pattern(verdict: VariableVerdict, pattern: str) -> bool:
    """An allow-dead glob: the full name, the Keras path, or a layer or name scope of it."""
    forms = [verdict.name, *([verdict.path] if verdict.path else [])]
    if any(fnmatch.fnmatchcase(form, pattern) for form in forms):
        return True
    scopes = verdict.name.split("/")[:-1]
    return any(
        fnmatch.fnmatchcase("/".join(scopes[: end + 1]), pattern) for end in range(len(scopes))
    )
