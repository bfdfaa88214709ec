"""What the TensorFlow worker process hands back: serialized protos and plain records."""

from __future__ import annotations

from dataclasses import dataclass, field

from gradcheck_cli.graph.model import SourceLocation


@dataclass
class VariableRecord:
    name: str
    trainable: bool
    dtype: str | None
    shape: tuple[int | None, ...] | None
    # Where the variable enters the top function (argument index) or graph (node name).
    arg_index: int | None = None
    node: str | None = None
    path: str | None = None
    location: SourceLocation | None = None


@dataclass
class EagerOutcome:
    """TensorFlow's eager verdict when the loss cannot be traced into a graph."""

    # variable name -> "gradient" | "zero" | "none" (read, no gradient) | "unread"
    verdicts: dict[str, str]
    left_at: SourceLocation | None
    reason: str


@dataclass
class Bundle:
    kind: str  # "tf2" | "tf1" | "eager"
    loss_name: str
    variables: list[VariableRecord] = field(default_factory=list)
    library: bytes = b""  # FunctionDefLibrary, the top function included
    top_function: str | None = None
    loss_output: int = 0
    loss_shape: tuple[int | None, ...] | None = None  # static shape of the loss, when known
    graph_def: bytes = b""  # TF1 only
    loss_tensor: str | None = None  # TF1 only
    op_defs: bytes = b""  # OpList of every op type used
    locations: dict[str, SourceLocation] = field(default_factory=dict)  # "node@function"
    custom_gradients: dict[str, tuple[str, ...]] = field(default_factory=dict)
    eager: EagerOutcome | None = None
    # TensorFlow's own verdicts when --verify asked for them: name -> "none" | "zero" | "gradient"
    tf_verdicts: dict[str, str] | None = None
    verify_error: str | None = None
    verify_method: str = "tf.GradientTape"
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the input could not be analysed (exit 2)
    # The same objective without model.losses (regularizers, add_loss), for Keras models.
    data_only: Bundle | None = None
