"""What the analysis concludes about each variable: a status and the cuts on its paths."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import Node, SourceLocation, Variable

if TYPE_CHECKING:
    from gradcheck_cli.analysis.model_map import ModelMap


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
    # read outside the loss before tracing; the value computed from it is a constant in the graph
    FROZEN_BEFORE_TRACING = "frozen_before_tracing"
    # an eager step: the tape never saw it read (a forward pass before the tape opened)
    NOT_READ_BY_TAPE = "not_read_by_tape"
    # its layer is called in the loss, but the call reads a value computed from it before
    # (in build() or __init__), a constant to the loss
    CALLED_NOT_READ = "called_not_read"
    # read, but what is computed from it is only stored into another variable (an Assign)
    ASSIGNED_AWAY = "assigned_away"
    # the line that made it ran again in the step and made a new variable the loss reads instead
    CREATED_AGAIN = "created_again"
    # read only by a tf.data op (a Dataset.map function), outside the tape: what the dataset
    # yields is data to the loss
    READ_IN_DATASET = "read_in_dataset"
    # no variable is read in the loss's graph, and the loss is computed from what a Python
    # function returns (tf.numpy_function): Python there is outside the graph and the tape
    BEHIND_PYTHON_FUNCTION = "behind_python_function"


@dataclass(frozen=True)
class Blocker:
    """An op on a path from a variable to the loss that gradient cannot cross."""

    op: str
    op_type: str
    reason: Reason
    message: str
    function: str | None = None
    location: SourceLocation | None = None
    # The gradient_override_map the op was made under that does not key its type (its items,
    # file and line): the map was meant for it.
    missed_override: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class PathStep:
    """One op on a path from a variable to the loss; `cut` says why gradient stops there."""

    op: str
    op_type: str
    function: str | None = None
    location: SourceLocation | None = None
    cut: Reason | None = None
    # The graph node itself (its output shapes, constant inputs), for the advice on fixes.
    node: Node | None = field(default=None, compare=False, repr=False)
    # Per input of the node: True when no trainable variable's value reaches it (a constant, a
    # placeholder, data), so that rewriting around the op takes no gradient from anything.
    untrained_inputs: tuple[bool, ...] = field(default=(), compare=False, repr=False)
    # The layer (as its variables are named) whose call made the op, where the op's name
    # scope is a call scope (`net_1/dense_1`) that names it otherwise (`net/dense`).
    layer: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Edge:
    """A data edge on a dead variable's way to the loss; `cut` when gradient cannot cross it.

    Each end is an op of the function body its `..._function` names (None: the top graph). An
    edge into a function that a control-flow op runs ends at the function's argument; an edge
    out of it starts at the op whose value the function returns and ends at the running op.
    """

    source: str
    target: str
    cut: bool = False
    source_function: str | None = None
    target_function: str | None = None


@dataclass(frozen=True, slots=True)
class SubgraphOp:
    """An op at an end of a subgraph edge: what it is and the user's line that made it."""

    op: str
    op_type: str
    function: str | None = None
    location: SourceLocation | None = None


@dataclass(frozen=True)
class NestedCall:
    """A function that a control-flow op on a dead variable's way runs (a tf.cond branch, a
    while body, a called tf.function), whose edges the subgraph holds."""

    caller: str
    # The body the caller lies in (None: the top graph), and the body it runs.
    caller_function: str | None
    function: str
    # Which of the caller's functions it is, as the graph names the role: "then_branch",
    # "else_branch", "branches", "body", "f".
    role: str
    # The function's arguments that the variable's value reaches: (_Arg op name, index).
    arguments: tuple[tuple[str, int], ...] = ()


def _of_variable(field: str) -> Any:
    """A read-only attribute of a verdict that is its variable's own."""
    return property(
        lambda verdict: getattr(verdict.variable, field), doc=f"The variable's {field}."
    )


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
    # The functions the subgraph enters, each drawn inside the op that runs it.
    nested: tuple[NestedCall, ...] = ()
    # The ops at the ends of the subgraph's edges, in the order of their names.
    subgraph_ops: tuple[SubgraphOp, ...] = ()
    # About how many edges a subgraph too large to keep (`cuts.MAX_SUBGRAPH_EDGES`) has: it is
    # then left empty (0: the subgraph is kept).
    subgraph_left_out: int = 0
    # The cuts that would remain if every stop_gradient were removed (empty if none would).
    cuts_without_stop_gradient: tuple[Blocker, ...] = ()
    # Cuts on the variable's other paths to the loss: removing them alone would not train it.
    side_cuts: tuple[Blocker, ...] = ()
    # An unused variable the loss reads (READ_NOT_REACHING): where it reads it first.
    read_at: SourceLocation | None = None
    # ASSIGNED_AWAY: the variable the value is stored into, and the assignment's line.
    assigned_to: Variable | None = None
    assigned_at: SourceLocation | None = None

    # The variable's own name, Keras path, trainability, dtype, shape and creation line.
    name = _of_variable("name")
    path = _of_variable("path")
    trainable = _of_variable("trainable")
    dtype = _of_variable("dtype")
    shape = _of_variable("shape")
    location = _of_variable("location")
    read_before_tracing = _of_variable("read_before_tracing")
    called_before_tape = _of_variable("called_before_tape")
    read_before_tape = _of_variable("read_before_tape")
    created_again = _of_variable("created_again")
    read_in_dataset = _of_variable("read_in_dataset")

    @property
    def dead(self) -> bool:
        return self.status in (Status.BLOCKED, Status.UNUSED)


class ConcernKind(enum.Enum):
    """What is suspicious; each kind is reported by its own rule (findings/rules.py)."""

    STOP_GRADIENT_UNUSED = enum.auto()
    STOP_GRADIENT_REDUNDANT = enum.auto()
    STOP_GRADIENT_NO_EFFECT = enum.auto()
    CUT_IN_BRANCH = enum.auto()
    CUT_ON_SOME_PATHS = enum.auto()
    TRAINED_ONLY_BY_REGULARIZER = enum.auto()
    DEAD_LOSS_TERM = enum.auto()


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
class StopGradientShape:
    """One StopGradient op of the top body, seen from the variables."""

    op: str
    # Every trainable variable whose value flows into the stopped tensor, in the program's order.
    upstream: tuple[str, ...]
    # `x + tf.stop_gradient(q - x)`: the forward value is q, the gradient goes to x only.
    straight_through: bool
    # A straight-through estimator's trainable variables upstream of x: the ones it trains.
    passed_to: tuple[str, ...] = ()


@dataclass(frozen=True)
class Analysis:
    verdicts: tuple[VariableVerdict, ...]
    concerns: tuple[Concern, ...] = ()
    # The top-level stop_gradients that cut dead variables, by op name: what feeds each one.
    stop_gradients: Mapping[str, StopGradientShape] = field(default_factory=dict)
    # Variables the graph reads beyond the candidates (a request's unlisted ones) that the loss
    # would train: set by the pipeline, which alone knows which variables are context.
    trainable_context: frozenset[str] = frozenset()
    # The loss's dtype, when known: a loss that cannot carry gradient (an int32 rank, a bool)
    # has no gradient for any variable, and TensorFlow's tape returns None for each.
    loss_dtype: str | None = None
    # The model's map (its scopes, the data flow between them, where the cuts sit), when the
    # analysis had a graph: set by whoever analysed the graph model (`model_map.model_map`).
    model_map: ModelMap | None = field(default=None, compare=False)
