"""What the analysis concludes about each variable: a status and the cuts on its paths."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import SourceLocation, Variable


class Status(str, enum.Enum):
    OK = "ok"
    BLOCKED = "blocked"
    UNUSED = "unused"
    FROZEN = "frozen"


class Unreached(str, enum.Enum):
    """Why an unused variable never reaches the loss."""

    NEVER_READ = "never_read"  # the loss function never reads it
    RECEIVED_NOT_READ = "received_not_read"  # an argument of the loss function, never read
    ONLY_ASSIGNED = "only_assigned"  # only an assignment reads it
    READ_NOT_REACHING = "read_not_reaching"  # read, but nothing computed from it reaches the loss


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
class PathStep:
    """One op on a path from a variable to the loss; `cut` says why gradient stops there."""

    op: str
    op_type: str
    function: str | None = None
    location: SourceLocation | None = None
    cut: Reason | None = None


@dataclass(frozen=True)
class Edge:
    """A data edge on a dead variable's way to the loss, between ops named `function/op`
    (`function` is empty in the top graph); `cut` when gradient cannot cross it."""

    source: str
    target: str
    cut: bool = False


@dataclass(frozen=True)
class VariableVerdict:
    """What became of one candidate variable; its name and origin are the variable's own."""

    variable: Variable
    status: Status
    blockers: tuple[Blocker, ...] = ()
    # Why an unused variable never reaches the loss.
    unreached: Unreached | None = None
    # Blocked variables: one shortest path to the loss (variable first, loss last), and every
    # edge on any of its paths to the loss (the subgraph `--format dot` draws).
    route: tuple[PathStep, ...] = ()
    subgraph: tuple[Edge, ...] = ()
    # The cuts that would remain if every stop_gradient were removed (empty if none would).
    cuts_without_stop_gradient: tuple[Blocker, ...] = ()

    @property
    def dead(self) -> bool:
        return self.status in (Status.BLOCKED, Status.UNUSED)

    @property
    def name(self) -> str:
        return self.variable.name

    @property
    def path(self) -> str | None:
        return self.variable.path

    @property
    def trainable(self) -> bool:
        return self.variable.trainable

    @property
    def dtype(self) -> str | None:
        return self.variable.dtype

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        return self.variable.shape

    @property
    def location(self) -> SourceLocation | None:
        return self.variable.location


class ConcernKind(str, enum.Enum):
    STOP_GRADIENT_UNUSED = "stop_gradient_unused"
    STOP_GRADIENT_REDUNDANT = "stop_gradient_redundant"
    STOP_GRADIENT_NO_EFFECT = "stop_gradient_no_effect"
    CUT_IN_BRANCH = "cut_in_branch"
    CUT_ON_SOME_PATHS = "cut_on_some_paths"
    TRAINED_ONLY_BY_REGULARIZER = "trained_only_by_regularizer"


@dataclass(frozen=True)
class Concern:
    """Something suspicious that does not make a variable dead (a useless stop_gradient...)."""

    kind: ConcernKind
    op: str
    op_type: str
    function: str | None = None
    location: SourceLocation | None = None
    variables: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class Analysis:
    verdicts: tuple[VariableVerdict, ...]
    concerns: tuple[Concern, ...] = ()
