"""Which variables a name the user types means: every form a report prints."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence

from gradcheck_cli.analysis.verdicts import VariableVerdict

# The name the user's code gives a variable where it is created (Report.python_name): a name
# too, when it is certainly the variable's.
NameOf = Callable[[VariableVerdict], str | None]

_ATTRIBUTE_STEP = re.compile(r"\.?[A-Za-z_]\w*|\[[^\]]*\]")


def variables_named(
    verdicts: Iterable[VariableVerdict], name: str, name_of: NameOf | None = None
) -> tuple[VariableVerdict, ...]:
    """The variables `name` means, most precise form first:

    - one variable: its full name or Keras path (`hidden1/weights_i`), its attribute path
      (`model.proj.kernel`), either with dots (`model.dense_1.kernel`);
    - one variable: the last part of its name (`weights_i`), only when no other has it;
    - a group, all of its variables: a layer or name scope (`dense_1`, `teacher/conv1`), an
      attribute holding a layer (`model.proj`), the name its creation line assigns
      (`self.output_kernel`, `output_kernel`, `self.proj` for a layer's weights).

    A last part that several variables share means none of them (see `sharing_last_part`).
    """
    candidates = tuple(verdicts)
    exact = tuple(v for v in candidates if name in _exact_forms(v))
    if exact:
        return exact
    short = sharing_last_part(candidates, name)
    if short:
        return short if len(short) == 1 else ()
    return tuple(v for v in candidates if name in _group_forms(v, name_of))


def sharing_last_part(
    verdicts: Iterable[VariableVerdict], name: str
) -> tuple[VariableVerdict, ...]:
    """The variables whose name (or attribute path) ends with the part `name`."""
    return tuple(v for v in verdicts if name in _last_parts(v))


def variables_matching(
    verdicts: Iterable[VariableVerdict], pattern: str, name_of: NameOf | None = None
) -> tuple[VariableVerdict, ...]:
    """The variables an allow-dead pattern accepts: a glob over every exact and group form of
    `variables_named` (not over last parts, which many variables share), or a name that
    `variables_named` reads."""
    candidates = tuple(verdicts)
    named = {v.name for v in variables_named(candidates, pattern, name_of)}
    return tuple(
        v
        for v in candidates
        if v.name in named
        or any(
            fnmatch.fnmatchcase(form, pattern)
            for form in (*_exact_forms(v), *_group_forms(v, name_of))
        )
    )


def _exact_forms(verdict: VariableVerdict) -> set[str]:
    forms = {verdict.name, verdict.name.replace("/", ".")}
    steps = _attribute_steps(verdict)
    if steps:
        forms.update({"".join(steps), _under_root(steps, verdict.name)})
    return forms


def _last_parts(verdict: VariableVerdict) -> set[str]:
    parts = {verdict.name.rpartition("/")[2]}
    steps = _attribute_steps(verdict)
    if steps:
        parts.add(steps[-1].lstrip("."))
    return parts


def _group_forms(verdict: VariableVerdict, name_of: NameOf | None) -> set[str]:
    scopes = verdict.name.split("/")[:-1]
    runs = [
        "/".join(scopes[start:end])
        for start in range(len(scopes))
        for end in range(start + 1, len(scopes) + 1)
    ]
    forms = {*runs, *(run.replace("/", ".") for run in runs)}
    steps = _attribute_steps(verdict)
    if steps:
        forms.update("".join(steps[:end]) for end in range(1, len(steps)))
        prefixes = ("/".join(scopes[:end]) for end in range(1, len(scopes) + 1))
        forms.update(_under_root(steps, prefix) for prefix in prefixes)
    assigned = name_of(verdict) if name_of else None
    if assigned:
        forms.update({assigned, assigned.rpartition(".")[2]})
    return forms


def _attribute_steps(verdict: VariableVerdict) -> list[str]:
    """The steps of the attribute path that holds the variable in the script (`model`,
    `.layers`, `[1]`, `.kernel`); none when its path is its Keras path."""
    path = verdict.path
    if not path or path == verdict.name:
        return []
    steps = _ATTRIBUTE_STEP.findall(path)
    return steps if "".join(steps) == path and not steps[0].startswith((".", "[")) else []


def _under_root(steps: list[str], name: str) -> str:
    """`name` in dots under the script's own variable (`model.dense_1.kernel` for the weight
    `dense_1/kernel` of the model bound to `model`)."""
    dotted = name.replace("/", ".")
    return dotted if dotted.startswith(f"{steps[0]}.") else f"{steps[0]}.{dotted}"


def common_scope(names: Iterable[str]) -> str | None:
    """The deepest name scope every name is in (`teacher` for `teacher/dense/kernel` and
    `teacher/dense_1/bias`), if any."""
    return "/".join(common_prefix([name.split("/")[:-1] for name in names])) or None


def common_prefix(parts: Sequence[list[str]]) -> list[str]:
    """The leading parts all lists share."""
    common: list[str] = []
    for column in zip(*parts, strict=False):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    return common
