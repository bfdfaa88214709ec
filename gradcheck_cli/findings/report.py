"""The report: what was checked, each variable's verdict, the findings, the verification."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gradcheck_cli.analysis.verdicts import Status, VariableVerdict
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.graph.model import SourceLocation

if TYPE_CHECKING:  # the advice is imported where a dead variable is explained
    from gradcheck_cli.analysis.model_map import ModelMap
    from gradcheck_cli.findings.advice.edits import CodeFix


@dataclass(frozen=True)
class SourceInfo:
    path: str
    kind: str  # "savedmodel" | "savedmodel-tf1" | "script" | "function" | "run"
    loss: str
    # `gradcheck run`: what the script called to ask for gradients, and where.
    request: RequestInfo | None = None
    # How the step was read when not from its own graph (`eager step: ...`), also in `loss`.
    step: str | None = None

    def read_as(self, step: str) -> SourceInfo:
        """This source with the way its step was read, in `step` and after the loss's label."""
        return replace(self, loss=f"{self.loss} ({step})", step=step)


@dataclass(frozen=True)
class RequestInfo:
    api: str  # "GradientTape.gradient", "tf.gradients", "Optimizer.minimize", ...
    location: SourceLocation | None


@dataclass(frozen=True)
class Disagreement:
    variable: str
    gradcheck: str  # gradcheck's status
    tensorflow: str  # "none" | "zero" | "gradient" | "error: ..."


@dataclass(frozen=True)
class Verification:
    """TensorFlow's own verdict on the same graph, compared with gradcheck's."""

    method: str
    disagreements: tuple[Disagreement, ...] = ()
    error: str | None = None

    @property
    def agrees(self) -> bool:
        return self.error is None and not self.disagreements


@dataclass(frozen=True)
class Report:
    source: SourceInfo
    variables: tuple[VariableVerdict, ...]
    findings: tuple[Finding, ...] = ()
    verification: Verification | None = None
    # The user's code at every location the report names, keyed by (file, line).
    code: Mapping[tuple[str, int], str] = field(default_factory=dict)
    # What to write instead, per dead variable name: the one fix every format gives.
    fixes: Mapping[str, str] = field(default_factory=dict)
    # The fixes that are code gradcheck can write itself (`--fix`), per dead variable name.
    code_fixes: Mapping[str, CodeFix] = field(default_factory=dict)
    # Per dead variable name, which cuts would remain without its tf.stop_gradients.
    still_cut: Mapping[str, str] = field(default_factory=dict)
    # Dead variables accepted on purpose, with the reason (allow-dead pattern or baseline).
    allowed: Mapping[str, str] = field(default_factory=dict)
    # Dead variables a `# gradcheck: ignore` comment suppresses, with the comment and its line.
    suppressed: Mapping[str, str] = field(default_factory=dict)
    # Whether a baseline was applied (SARIF then tells each result new or unchanged).
    baselined: bool = False
    # Dead variables whose cut looks intended (a teacher under tf.stop_gradient, a network
    # trained by another loss), with the one-line reason; told as warnings, not errors.
    intended: Mapping[str, str] = field(default_factory=dict)
    # `gradcheck run`: trainable variables this loss reads and would train, that no request
    # lists (GC213).
    read_not_requested: tuple[str, ...] = ()
    # Per variable name, the name the user's code binds the variable (or its layer) to where it
    # is created, when that name is certainly the variable's (`findings.source.created_name`).
    python_names: Mapping[str, str] = field(default_factory=dict)
    # The model's scopes, coloured by their variables' verdicts, with the cuts placed on them:
    # for a SavedModel, a script or a run's request (None: no graph, an eager step's verdicts).
    model_map: ModelMap | None = None

    def python_name(self, verdict: VariableVerdict) -> str | None:
        """The name the user's code gives `verdict`'s variable, when it is certainly its."""
        return self.python_names.get(verdict.name)

    def code_at(self, location: SourceLocation | None) -> str | None:
        return None if location is None else self.code.get((location.file, location.line))

    def count(self, status: Status) -> int:
        return sum(1 for v in self.variables if v.status is status)

    @property
    def dead(self) -> tuple[VariableVerdict, ...]:
        """Dead trainable variables that no allow-dead pattern, baseline or ignore comment
        accepts and whose cut does not look intended."""
        return tuple(
            v
            for v in self.variables
            if v.dead and not self.accepted(v.name) and v.name not in self.intended
        )

    @property
    def fixable(self) -> tuple[str, ...]:
        """Dead variables of a script whose fix is code gradcheck can write (`--fix`)."""
        if self.source.kind not in ("script", "run"):
            return ()
        return tuple(
            v.name
            for v in self.dead
            if v.name in self.code_fixes
            and all(file.endswith(".py") for file in self.code_fixes[v.name].files)
        )

    def accepted(self, name: str) -> bool:
        """Whether the dead variable `name` is accepted: allowed or suppressed."""
        return name in self.allowed or name in self.suppressed

    def acceptance(self, name: str) -> str:
        """How the variable `name` is accepted: `suppressed` (an ignore comment), `allowed`
        (an allow-dead pattern, the baseline), or "" when it is not."""
        return (
            "suppressed" if name in self.suppressed else "allowed" if name in self.allowed else ""
        )

    @property
    def untrained(self) -> tuple[VariableVerdict, ...]:
        """Dead trainable variables that no allow-dead pattern, baseline or ignore comment
        accepts, the ones whose cut looks intended included: every variable the report tells a
        story about."""
        return tuple(v for v in self.variables if v.dead and not self.accepted(v.name))

    @property
    def summary(self) -> dict[str, int]:
        counts = {"trainable": sum(1 for v in self.variables if v.status is not Status.FROZEN)}
        counts.update({status.value: self.count(status) for status in Status})
        return counts
