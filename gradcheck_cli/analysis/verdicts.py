"""What the analysis concludes about each variable: a status and the cuts on its paths."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gradcheck_cli.graph.model import SourceLocation


class Status(str, enum.Enum):
    OK = "ok"
    BLOCKED = "blocked"
    UNUSED = "unused"
    FROZEN = "frozen"


class Reason(str, enum.Enum):
    """Why gradient does not cross an edge (DESIGN.md, "Reasons a path is cut")."""

    STOP_GRADIENT = "stop_gradient"
    NON_DIFFERENTIABLE_OP = "non_differentiable_op"
    INTEGER_DTYPE = "integer_dtype"
    INDEX_OR_SHAPE_INPUT = "index_or_shape_input"
    CUSTOM_GRADIENT_NONE = "custom_gradient_none"
    ZERO_GRADIENT = "zero_gradient"
    ASSIGN = "assign"
    OTHER = "other"


@dataclass(frozen=True)
class Blocker:
    """An op on a path from a variable to the loss that gradient cannot cross."""

    op: str
    op_type: str
    reason: Reason
    message: str
    function: str | None = None
    location: SourceLocation | None = None


@dataclass(frozen=True)
class VariableVerdict:
    name: str
    path: str | None
    trainable: bool
    dtype: str | None
    shape: tuple[int | None, ...] | None
    status: Status
    blockers: tuple[Blocker, ...] = ()
    location: SourceLocation | None = None
    # Why an unused variable never reaches the loss, in words.
    explanation: str | None = None

    @property
    def dead(self) -> bool:
        return self.status in (Status.BLOCKED, Status.UNUSED)
