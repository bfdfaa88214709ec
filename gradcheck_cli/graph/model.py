"""The TensorFlow-free graph model that every loader produces and the analysis reads."""

from __future__ import annotations

import bisect
import enum
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from gradcheck_cli.graph.flat_nodes import FlatNodes

# TensorFlow's backprop_util.IsTrainable set: only these dtypes carry gradient.
TRAINABLE_DTYPES = frozenset(
    {"float16", "bfloat16", "float32", "float64", "complex64", "complex128", "resource", "variant"}
)

ARG_OP = "_Arg"
"""Op type of the pseudo-node that stands for a function argument."""


CARRIES_GRADIENT: frozenset[str | None] = frozenset(
    {*TRAINABLE_DTYPES, *(f"{dtype}_ref" for dtype in TRAINABLE_DTYPES), None}
)
"""The dtypes of tensors that can carry gradient, reference dtypes and the unknown (None,
given the benefit of the doubt) included: `dtype in CARRIES_GRADIENT` in hot loops."""


def is_trainable_dtype(dtype: str | None) -> bool:
    """True if a tensor of this dtype can carry gradient (unknown dtypes are given the benefit)."""
    return dtype in CARRIES_GRADIENT


class _Named(Protocol):
    name: str


def numbered_name(base: str, number: int, taken: Container[str]) -> str:
    """The name of the variable numbered `number` (from 0) among those TensorFlow calls `base`
    ("Variable"): `base`, then `base_1`, `base_2`, ..., past every name that is `taken`. Every
    form and every format tells variables that share a name apart by this one rule."""
    candidate = base if number == 0 else f"{base}_{number}"
    while candidate in taken:
        number += 1
        candidate = f"{base}_{number}"
    return candidate


def make_names_unique(items: Iterable[_Named]) -> None:
    """TensorFlow lets two variables share a name ("Variable"); reports need them apart. The
    first keeps the name, the others are numbered in order (`numbered_name`), never into a
    name another item has (`Variable_1` given by the script)."""
    listed = list(items)
    taken = {item.name for item in listed}
    counts: dict[str, int] = {}
    for item in listed:
        seen = counts.get(item.name, 0)
        counts[item.name] = seen + 1
        if seen:
            item.name = numbered_name(item.name, seen, taken)
            taken.add(item.name)


class CreationNames:
    """Each variable named once, by identity: its Keras path or TensorFlow name (its base),
    numbered (`numbered_name`: `Variable`, `Variable_1`, ...) by the order the script created
    the variables that share that base, whichever loss, request or list names it first, and
    never into a name given already. `created`: the script's variables in the order it created
    them, a list that may grow; `in_order(variable)`: False for what a library made for itself,
    which is numbered after the script's own variables, as is a variable not in `created`."""

    def __init__(
        self,
        created: Sequence[Any],
        base_of: Callable[[Any], str],
        in_order: Callable[[Any], bool],
    ) -> None:
        self._created = created
        self._base_of = base_of
        self._in_order = in_order
        # id -> (the variable, kept alive so that its id stays its own; its name)
        self._names: dict[int, tuple[Any, str]] = {}
        self._taken: set[str] = set()
        # a base -> the positions in `created` of the variables numbered in order that have it
        self._sharing: dict[str, list[int]] = {}
        self._positions: dict[int, int] = {}  # id -> position in `created`
        self._seen = 0  # created[:_seen] are in `_sharing` and `_positions`

    @classmethod
    def as_asked(cls) -> CreationNames:
        """Names for variables whose creation is not known: those that share a name told
        apart in the order they are asked for."""
        return cls((), str, lambda _: False)

    def name(self, variable: Any, base: str | None = None) -> str:
        """The variable's name; `base`: its base, when the caller knows it better than
        `base_of` (a Keras variable given for its tf.Variable)."""
        known = self._names.get(id(variable))
        if known is not None:
            return known[1]
        base = self._base_of(variable) if base is None else base
        self._catch_up()
        sharing = self._sharing.get(base, [])
        position = self._positions.get(id(variable))
        if position is not None and self._in_order(variable):
            number = bisect.bisect_left(sharing, position)
        else:
            number = len(sharing)
        name = numbered_name(base, number, self._taken)
        self._taken.add(name)
        self._names[id(variable)] = (variable, name)
        return name

    def _catch_up(self) -> None:
        """`_sharing` and `_positions` brought up to every variable created so far."""
        for position in range(self._seen, len(self._created)):
            variable = self._created[position]
            self._positions.setdefault(id(variable), position)
            if self._in_order(variable):
                self._sharing.setdefault(self._base_of(variable), []).append(position)
        self._seen = len(self._created)


@dataclass(frozen=True, order=True)
class SourceLocation:
    """A line of user code."""

    file: str
    line: int
    function: str | None = None
    # The user frames that called this one, outermost first (this frame is the innermost).
    callers: tuple[SourceLocation, ...] = field(default=(), compare=False, repr=False)
    # The library whose code made the op at this line of the user's (`Keras`, `TensorFlow's
    # moments`), when the line called a library rather than the op's own API: read by the
    # findings for stop_gradients only (`tf.stop_gradient` is the one API it recognises).
    inside: str | None = field(default=None, compare=False, repr=False)
    # Where on the line the call that ran starts (Python's position, in UTF-8 bytes), when
    # known: read for the line that created a variable or layer, to tell which of the line's
    # calls created it.
    column: int | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class TensorRef(NamedTuple):
    """Output `index` of node `node` in the same body.

    A named tuple, not a dataclass: every walk of the graph hashes and compares millions of
    these, and a tuple does both in C.
    """

    node: str
    index: int = 0


CONSTANT_ATTR = "value"
"""The attribute under which a Const node keeps its value, when it is small (a `Constant`)."""


@dataclass(frozen=True)
class Constant:
    """The value of a small Const node: its shape, and its elements flattened in row-major
    order, as TensorFlow stores them (fewer elements than the shape holds repeat the last one;
    none at all means zeros)."""

    shape: tuple[int, ...]
    elements: tuple[float | int | bool, ...]

    @property
    def size(self) -> int:
        size = 1
        for dim in self.shape:
            size *= dim
        return size

    def all_equal(self, value: float | int | bool) -> bool:
        """True if every element of the tensor equals `value`."""
        if not self.elements:
            return value == 0
        return all(element == value for element in self.elements)

    def flat(self) -> tuple[float | int | bool, ...]:
        """Every element, the repeated last one spelled out."""
        if not self.elements:
            return (0,) * self.size
        missing = self.size - len(self.elements)
        return self.elements[: self.size] + (self.elements[-1],) * max(missing, 0)


@dataclass(slots=True)
class Node:
    """One op of a body. Function arguments are nodes of type `_Arg` with no inputs.

    Slotted: a graph holds one per op, a million in the largest.
    """

    name: str
    op_type: str
    inputs: tuple[TensorRef, ...] = ()
    output_dtypes: tuple[str | None, ...] = ()
    # Called functions by role: "f", "then_branch", "else_branch", "branches", "body", "cond".
    calls: dict[str, tuple[str, ...]] = field(default_factory=dict)
    gradient_op_type: str | None = None
    # The few attributes differentiability rules read (e.g. "is_training", "DstT").
    attrs: dict[str, object] = field(default_factory=dict)
    location: SourceLocation | None = None
    # Static output shapes (None: unknown rank), when the loader knows them.
    output_shapes: tuple[tuple[int | None, ...] | None, ...] = ()
    # Per input: True when it comes from a Const node (through Identity ops).
    constant_inputs: tuple[bool, ...] = ()


@dataclass
class Body:
    """A function body (FunctionDef) or a whole top-level graph (GraphDef).

    `nodes` is held as `FlatNodes` (flat arrays, a `Node` made on each access); a dict of
    nodes given here is turned into them.
    """

    name: str
    nodes: FlatNodes
    args: tuple[str, ...] = ()
    rets: tuple[TensorRef, ...] = ()

    def __post_init__(self) -> None:
        from gradcheck_cli.graph.flat_nodes import FlatNodes

        if not isinstance(self.nodes, FlatNodes):
            self.nodes = FlatNodes.of(self.nodes.values())

    def input_dtype(self, ref: TensorRef) -> str | None:
        nodes = self.nodes
        n = nodes.ids.get(ref.node)
        if n is None:
            return None
        dtypes = nodes.output_dtypes(n)  # read off the arrays: no `Node` made for it
        return dtypes[ref.index] if ref.index < len(dtypes) else None


MISSED_OVERRIDE = "missed_override"
"""The key of `Node.attrs` for the gradient_override_map an op was made under that does not key
its type: (the map's items, file, line). The user meant the map for an op there."""


@dataclass
class Variable:
    """A variable the loss might train: where it enters the top body and what it is."""

    name: str
    trainable: bool
    dtype: str | None
    shape: tuple[int | None, ...] | None
    # The tensor in the top body that stands for the variable (a captured `_Arg`, a
    # VarHandleOp/VariableV2 node), or None when the loss function never reads it.
    source: TensorRef | None
    path: str | None = None
    location: SourceLocation | None = None
    # Where the variable was read eagerly outside the loss (at import, in `build()`), when the
    # loss captured a value computed from that read: a constant to the loss, not the variable.
    read_before_tracing: SourceLocation | None = None
    # An eager step rebuilt from the ops its tape recorded, that the tape never saw read: a
    # forward pass run before the tape opened is a constant to the tape.
    unread_by_tape: bool = False
    # ... and the line where the script last called a layer or model that owns it, if known,
    # or the line that read it for a value the tape used, computed before the tape opened.
    called_before_tape: SourceLocation | None = None
    read_before_tape: SourceLocation | None = None
    # An eager step: the line that made it ran again inside the tape, and the loss reads the new
    # variable made there (`self.w = tf.Variable(...)` in a layer's call), not this one.
    created_again: SourceLocation | None = None
    # Run mode: a tf.data op that took it in (a Dataset.map function that reads it), by its op
    # type and line: the dataset computes with it outside the tape, and yields data to the loss.
    read_in_dataset: tuple[str, SourceLocation | None] | None = None
    # The Keras layer whose add_weight made it, as a number its sibling weights share, and
    # whether Keras records that layer as ever called: a sibling the loss reads says the layer
    # is called, a layer never called is not (Keras's own record, not the ops' name scopes).
    layer: int | None = None
    layer_called: bool | None = None


class CustomGradient(str, enum.Enum):
    """What a custom gradient function returns for one of its inputs."""

    FLOWS = "flows"  # a gradient that may be non-zero
    NONE = "none"  # None: no gradient at all
    ZERO = "zero"  # a structurally zero tensor (zeros_like, a zero constant)


class GraphKind(str, enum.Enum):
    """What the top body holds: a TF2 function (its captured arguments) or a whole TF1 graph."""

    FUNCTION = "function"
    TF1_GRAPH = "tf1_graph"


TF1_TOP = "graph"
"""Name of the top body of a TF1 graph (a GraphDef has no function name)."""


class TensorFlowVerdict(str, enum.Enum):
    """What TensorFlow's own gradient of the loss says about one variable."""

    GRADIENT = "gradient"  # a gradient that is not all zeros
    ZERO = "zero"  # a gradient of zeros on every input tried
    NONE = "none"  # read by the loss, but no gradient (None)
    UNREAD = "unread"  # the loss never reads the variable

    @property
    def dead(self) -> bool:
        return self is not TensorFlowVerdict.GRADIENT


@dataclass
class Program:
    """Everything the analysis needs: bodies, the loss, the candidate variables."""

    bodies: dict[str, Body]
    top: str
    loss: TensorRef
    variables: list[Variable]
    # gradient_op_type -> what its gradient function returns per IdentityN input.
    custom_gradients: dict[str, tuple[CustomGradient, ...]] = field(default_factory=dict)
    # What the loader could not model; each becomes a finding.
    notes: list[str] = field(default_factory=list)
    # False when the model carries no source locations at all (a SavedModel without debug info).
    located: bool = True
    # The loss tensor's static shape, when known (() is a scalar).
    loss_shape: tuple[int | None, ...] | None = None
    kind: GraphKind = GraphKind.FUNCTION
    # How many of the top function's arguments, first, are its inputs: the others hold what it
    # captured (variables, constants). None: not known, any may be an input.
    inputs: int | None = None

    @property
    def top_body(self) -> Body:
        return self.bodies[self.top]
