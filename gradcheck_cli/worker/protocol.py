"""What gradcheck asks the TensorFlow worker process, and each thing the worker can answer."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from pathlib import Path

from gradcheck_cli.graph.model import (
    CustomGradient,
    SourceLocation,
    TensorFlowVerdict,
    Variable,
)
from gradcheck_cli.options import CheckOptions

# The warm launcher's socket messages (`jobs/warm_launcher.py`): one holds a worker's whole
# environment.
MESSAGE_BYTES = 1024 * 1024

UNWRITTEN_EXIT = 113
"""The worker's exit code when it could not write its result (a full or unwritable temporary
folder): the message is then gradcheck's, not the model's."""


class Job(str, enum.Enum):
    SCRIPT = "script"  # import a Python script and trace its loss
    KERAS_FILE = "keras_file"  # load a .keras / .h5 model and trace its objective
    VERIFY_SAVED_MODEL = "verify_saved_model"  # TensorFlow's own gradients on a SavedModel loss
    RUN = "run"  # run a training script as __main__ until it asks for gradients


@dataclass(frozen=True)
class WorkerRequest:
    """One job for the worker; `options.loss` names the loss (a SavedModel's: the resolved one)."""

    job: Job
    path: Path
    options: CheckOptions
    arguments: tuple[str, ...] = ()  # Job.RUN: the script's own command-line arguments
    run_on: bool = False  # Job.RUN: let the script go on once its requests are delivered
    # Record what the job read (`file_reads`), for the cache: written beside the result.
    record_reads: bool = False
    # (absolute path, text) of files the job reads as holding that text: a fix checked before
    # it is written. Such a request is never answered from the cache.
    sources: tuple[tuple[str, str], ...] = ()


def reads_path(result_path: Path) -> Path:
    """Where the worker leaves what it read (`WorkerRequest.record_reads`), before its result."""
    return result_path.with_name("reads.pickle")


def snapshot_path(result_path: Path, number: int) -> Path:
    """Where a run's worker leaves its graph request `number` (from 0) as soon as it is made,
    while the script goes on: gradcheck analyses it meanwhile (`pipeline.check_run`). The
    result still holds every request; a snapshot only lets the work start sooner."""
    return result_path.with_name(f"snapshot-{number}.pickle")


class ReadKind(str, enum.Enum):
    FILE = "file"  # its content
    FOLDER = "folder"  # the names it holds (os.listdir, os.scandir, glob)


@dataclass(frozen=True)
class FileRead:
    """One path as the code found it: the SHA-256 of its content (of its sorted names, for a
    folder), None if it did not exist; the time and size let a check skip the hashing."""

    path: str
    kind: ReadKind
    digest: str | None
    mtime_ns: int | None = None
    size: int | None = None


@dataclass(frozen=True)
class Reads:
    """Everything the worker's result depends on apart from installed libraries."""

    files: tuple[FileRead, ...]
    # Environment variables the code looked up, with the value it got (None: not set).
    environment: tuple[tuple[str, str | None], ...] = ()
    recorded_ns: int = field(default_factory=time.time_ns)
    # False when a file changed while the worker ran: the result may mix old and new content.
    settled: bool = True


@dataclass(frozen=True)
class TensorFlowGradients:
    """TensorFlow's own verdict per variable name (`--verify`), or why it could not give one."""

    method: str
    verdicts: dict[str, TensorFlowVerdict] | None = None
    error: str | None = None


@dataclass
class TracedVariable:
    """A candidate variable and where it enters the traced graph.

    The variable's `source` is None here: it is the tensor in the graph model, which exists only
    once the graph is built from the protos.
    """

    variable: Variable
    arg_index: int | None = None  # TF2: the top function's argument that captures it
    node: str | None = None  # TF1: the variable's node in the graph


@dataclass
class _Traced:
    """What both traced forms carry: protos of the graph and what they do not say."""

    loss_name: str
    variables: list[TracedVariable]
    library: bytes  # FunctionDefLibrary
    op_defs: bytes  # OpList of every op type used
    loss_shape: tuple[int | None, ...] | None  # static shape of the loss, when known
    locations: dict[str, SourceLocation] = field(default_factory=dict)  # "node@function"
    # Static output shapes by "node@function" (None: unknown rank).
    output_shapes: dict[str, tuple[tuple[int | None, ...] | None, ...]] = field(
        default_factory=dict
    )
    custom_gradients: dict[str, tuple[CustomGradient, ...]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the worker could not model exactly
    tensorflow: TensorFlowGradients | None = None  # when --verify asked for it
    # Trainable variables the script created that are no candidates: (name, why).
    left_out: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class TracedFunction(_Traced):
    """A TF2 loss traced into a function library; the loss is one output of `top_function`."""

    top_function: str = ""
    loss_output: int = 0
    # The same objective without model.losses (regularizers, add_loss), for Keras models.
    data_only: TracedFunction | None = None
    # A Keras train_step with several GradientTapes: the other tapes' targets, each traced over
    # the variables its tape differentiates; each variable is judged by the tape that lists it.
    other_tapes: list[TracedFunction] = field(default_factory=list)
    # Trainable variables of that model that no tape of its train_step differentiates.
    untrained: tuple[str, ...] = ()
    # A train_step tape: the variables it differentiates; the others it reads are not judged.
    tape_variables: tuple[str, ...] | None = None


@dataclass
class TracedGraph(_Traced):
    """A TF1 graph; the loss is the tensor `loss_tensor` in it."""

    graph_def: bytes = b""
    loss_tensor: str = ""
    # Variables in the graph only so that the analysis sees them: not the loss's to judge.
    context_variables: list[str] = field(default_factory=list)
    # An eager step rebuilt from the ops TensorFlow ran: TensorFlow's own verdicts, the judge
    # whenever the rebuilt graph tells another story.
    eager_fallback: EagerResult | None = None


@dataclass
class EagerResult:
    """TensorFlow's tape verdicts when the loss cannot be traced into a graph."""

    loss_name: str
    variables: list[Variable]
    gradients: dict[str, TensorFlowVerdict]  # trainable variables only, by name
    left_at: SourceLocation | None  # where the value leaves TensorFlow
    reason: str  # TensorFlow's words for it
    tensorflow: TensorFlowGradients | None = None  # when --verify asked for it
    # `gradcheck run`: variables whose gradient in the step was all zeros (not None)
    zeros: frozenset[str] = frozenset()


@dataclass
class GradientRequest:
    """One place a running script asked for gradients, and the variables it asked them for."""

    api: str  # what the script called: "GradientTape.gradient", "tf.gradients", ...
    location: SourceLocation | None  # the script's line that asked
    result: TracedGraph | EagerResult  # the loss; its variables are the ones differentiated


@dataclass(frozen=True)
class IdleTraining:
    """A Keras training call on a compiled model with no trainable weight: it asks for no
    gradients (the model or all its layers frozen, in Keras 3 even after compile)."""

    api: str  # "discriminator.train_on_batch"
    model: str
    location: SourceLocation | None
    frozen: int  # how many weights the model has, all non-trainable


@dataclass
class RunResult:
    """What a script run up to its first training step asked for."""

    requests: list[GradientRequest]
    # Trainable variables the script created that no request differentiates.
    untrained: list[Variable] = field(default_factory=list)
    # Keras training calls that trained nothing: no trainable weight when they ran.
    idle: list[IdleTraining] = field(default_factory=list)
    # Trainable variables the script created that are no candidates: (name, why).
    left_out: list[tuple[str, str]] = field(default_factory=list)
    # Trainable variables no request lists that hold a requested variable's values: (name,
    # that variable's name).
    copies: list[tuple[str, str]] = field(default_factory=list)
    # Gradient requests in the user's files that the run stopped before reaching.
    unreached: tuple[SourceLocation, ...] = ()
    # Untrained variables of models no request lists a variable of, where every request
    # optimises inputs (an image through a fixed feature extractor): fixed by design.
    fixed: tuple[str, ...] = ()


@dataclass
class WorkerFailure:
    """The input could not be analysed (exit 2); `message` is what the user reads."""

    message: str


Traced = TracedFunction | TracedGraph
WorkerResult = (
    TracedFunction | TracedGraph | EagerResult | TensorFlowGradients | RunResult | WorkerFailure
)
