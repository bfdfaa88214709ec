"""One gradient request of a running script as the worker's result: its loss, its variables."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from gradcheck_cli.differentiability.reasons import UNSEEN_EAGER_CUT
from gradcheck_cli.graph.model import CreationNames, SourceLocation, TensorFlowVerdict, Variable
from gradcheck_cli.source_code.debug_info import made_by_a_library, with_call_column
from gradcheck_cli.tracing import traced
from gradcheck_cli.tracing.keras_weights import KerasWeights, layer_of
from gradcheck_cli.tracing.leaving_tensorflow import EagerReads, Leave
from gradcheck_cli.worker.protocol import (
    EagerResult,
    GradientRequest,
    TensorFlowGradients,
    TracedGraph,
    TracedVariable,
)

EAGER_TAPE = "the script's own GradientTape, run eagerly"


@dataclass
class CreatedVariables:
    """Every tf.Variable the script created, where, and what Keras says of it."""

    variables: list[Any] = field(default_factory=list)
    at: dict[int, SourceLocation | None] = field(default_factory=dict)
    # Keras variables and their layers' construction lines
    keras: KerasWeights = field(default_factory=KerasWeights)

    # id(tf.Variable) -> the name of the tf.Module whose method created it
    owners: dict[int, str] = field(default_factory=dict)
    # ids of the variables a tf.distribute strategy makes for itself (not for a layer)
    bookkeeping: set[int] = field(default_factory=set)
    # ids of the variables a library made (made_by_a_library): its bookkeeping unless
    # a model, layer or module of the script owns them
    by_libraries: set[int] = field(default_factory=set)

    # The name of each variable in every request and list of the run, given once.
    names: CreationNames = field(init=False)
    # The eager reads of variables, and the tensors computed from them (run mode records them).
    reads: EagerReads = field(default_factory=lambda: EagerReads(lines=True))

    def __post_init__(self) -> None:
        self.names = CreationNames(self.variables, self._shared_name, self._numbered_in_order)

    def add(self, variable: Any) -> None:
        self.variables.append(variable)
        stack = traceback.extract_stack()[:-2]
        self.at[id(variable)] = with_call_column(_created_at(stack), sys._getframe(1))
        if _made_by_a_strategy(stack):
            self.bookkeeping.add(id(variable))
        if made_by_a_library(stack):
            self.by_libraries.add(id(variable))
        owner = _creating_module(sys._getframe(1))
        if owner is not None:
            self.owners[id(variable)] = owner

    def describe(self, variable: Any) -> tuple[Any, Variable]:
        """(backing tf.Variable, the graph model's Variable) for a tf or Keras variable."""
        tf_variable = backing(variable)
        self.keras.settle()
        keras_variable = (
            variable if tf_variable is not variable else self.keras.variables.get(id(tf_variable))
        )
        if keras_variable is not None:
            trainable = bool(keras_variable.trainable)
        else:
            trainable = bool(tf_variable.trainable)
        name = self.names.name(tf_variable, self._shared_name(tf_variable, keras_variable))
        location = self.keras.constructed_at.get(id(tf_variable)) or self.at.get(id(tf_variable))
        if location is None and is_graph_variable(tf_variable):
            location = traced.user_location(tf_variable.op.traceback)
        model = traced.model_variable(tf_variable, name, trainable, location=location)
        layer, called = layer_of(self.keras, tf_variable)
        dataset = self.reads.datasets.get(_handle_of(tf_variable))
        return tf_variable, replace(
            model, layer=layer, layer_called=called, read_in_dataset=dataset
        )

    def _numbered_in_order(self, variable: Any) -> bool:
        """Whether the variable is numbered by its place among the script's variables: the
        script's own, and the weights of Keras layers; not a library's bookkeeping (an
        optimizer's, TensorFlow Probability's)."""
        return id(variable) not in self.by_libraries or id(variable) in self.keras.info

    def _shared_name(self, tf_variable: Any, keras_variable: Any = None) -> str:
        """The name before it is made unique: the Keras path, else TensorFlow's name (under the
        tf.Module whose method created it)."""
        if keras_variable is None:
            keras_variable = self.keras.variables.get(id(tf_variable))
        if keras_variable is not None:
            return self.keras.path(keras_variable)
        name = traced.variable_name(tf_variable)
        owner = self.owners.get(id(tf_variable))
        if owner and "/" not in name:  # `self.w = tf.Variable(...)` in a tf.Module
            name = f"{owner}/{name}"
        return name


def _created_at(stack: Any) -> SourceLocation | None:
    """The user's line that created a variable; inside a tf.function being traced, autograph's
    copy of the user's code is mapped back to the user's own lines by TensorFlow's stack."""
    from tensorflow.python.eager import context

    if context.executing_eagerly():
        return traced.user_location(stack)
    from tensorflow.python.util import tf_stack

    return traced.user_location(tf_stack.extract_stack())


def _made_by_a_strategy(stack: Any) -> bool:
    """True if the first library frame below the user's code is tf.distribute's: the strategy
    made the variable for itself (`MirroredStrategy()`), not for a layer that asked for it."""
    from gradcheck_cli.source_code.debug_info import is_user_file

    users = [index for index, frame in enumerate(stack) if is_user_file(frame.filename)]
    if not users:
        return False
    after = stack[users[-1] + 1 : users[-1] + 2]
    return bool(after) and "/tensorflow/python/distribute/" in after[0].filename


def _creating_module(frame: Any) -> str | None:
    """The name of the tf.Module (not a Keras layer) whose own code created a variable."""
    import tensorflow as tf

    from gradcheck_cli.source_code.debug_info import is_user_file

    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    owner = frame.f_locals.get("self") if frame is not None else None
    if isinstance(owner, tf.Module) and not hasattr(owner, "add_weight"):
        return str(owner.name)
    return None


def backing(variable: Any) -> Any:
    """The tf.Variable behind a Keras variable (or the variable itself)."""
    import tensorflow as tf

    if isinstance(variable, tf.Variable):
        return variable
    inner = getattr(variable, "_value", None)
    return inner if isinstance(inner, tf.Variable) else variable


def is_variable(value: Any) -> bool:
    import tensorflow as tf

    return isinstance(backing(value), tf.Variable)


def is_graph_variable(variable: Any) -> bool:
    try:
        return variable.op is not None and not variable.op.graph.building_function
    except (AttributeError, RuntimeError):
        return False


def variables_of(sources: Any) -> list[tuple[int, Any]]:
    """(position in the flat sources, variable) for each variable among a tape's sources."""
    import tensorflow as tf

    return [(i, s) for i, s in enumerate(tf.nest.flatten(sources)) if is_variable(s)]


def eager_request(
    variables: list[tuple[int, Any]],
    gradients: Any,
    watched: set[int],
    left: Leave | None,
    created: CreatedVariables,
    label: str,
    since: int | None = None,
    read: dict[int, SourceLocation] | None = None,
) -> EagerResult:
    """A request made eagerly: TensorFlow's own verdicts, and where a value left TensorFlow.
    `since`: how many variables the script had created when the tape opened; `read`: the line
    that read each variable (by handle) for a value the tape used, computed before it opened."""
    import tensorflow as tf

    flat = tf.nest.flatten(gradients) if gradients is not None else []
    described = [(index, *created.describe(variable)) for index, variable in variables]
    again = _created_again([v for _, v, _ in described], watched, created, since)
    read = read or {}
    before = {id(v): read.get(_handle_of(v), read.get(ALL_VARIABLES)) for _, v, _ in described}
    models = [
        replace(
            model,
            # A weight made anew at each call: where it was made, not where its layer was.
            location=again.get(id(v), model.location),
            created_again=again.get(id(v)),
            read_before_tape=before.get(id(v)),
        )
        for _, v, model in described
    ]
    # Eager variables often share TensorFlow's name ("Variable"): verdicts are keyed by the
    # names `describe` made unique for the whole run.
    verdicts: dict[str, TensorFlowVerdict] = {}
    zeros: set[str] = set()
    for index, tf_variable, model in described:
        if not model.trainable:
            continue
        if index < len(flat) and flat[index] is not None:
            verdicts[model.name] = TensorFlowVerdict.GRADIENT
            if _all_zeros(flat[index]):
                zeros.add(model.name)
        elif id(tf_variable) in watched:
            verdicts[model.name] = TensorFlowVerdict.NONE
        else:
            verdicts[model.name] = TensorFlowVerdict.UNREAD
    if left is not None:
        reason = left.reason
    else:
        reason = UNSEEN_EAGER_CUT
    return EagerResult(
        loss_name=label,
        variables=models,
        gradients=verdicts,
        left_at=left.location if left is not None else None,
        reason=reason,
        # --verify compares with TensorFlow's word: zeros are a zero gradient there
        tensorflow=TensorFlowGradients(
            EAGER_TAPE, {**verdicts, **dict.fromkeys(zeros, TensorFlowVerdict.ZERO)}
        ),
        zeros=frozenset(zeros),
    )


def reconstructed_request(
    eager: EagerResult,
    ops: list[Any],
    functions: dict[str, Any],
    target: Any,
    variables: list[tuple[int, Any]],
    created: CreatedVariables,
    called_at: Callable[[Any], tuple[SourceLocation | None, bool]] = lambda _: (None, False),
) -> TracedGraph | EagerResult:
    """An eager request as the graph of the ops its tape recorded, carrying the eager result
    (TensorFlow's verdicts and where a value left TensorFlow) for when the two disagree.
    `called_at(variable)`: where the script last called a layer that owns it, if before the
    tape opened (for a variable the tape never saw read: a model called before the tape), and
    whether such a layer was called with the tape open (then its call never read it)."""
    import tensorflow as tf

    from gradcheck_cli.run_mode.eager_recording import rebuild

    flat = [t for t in tf.nest.flatten(target) if t is not None]
    if len(flat) != 1 or not isinstance(flat[0], tf.Tensor):
        return eager
    described = [created.describe(variable) for _, variable in variables]
    requested = {id(v) for v, _ in described}
    others = [v for v in created.variables if id(v) not in requested]
    handles = {_handle_of(v): traced.variable_name(v) for v in others}
    handles.update({_handle_of(v): model.name for v, model in described})
    reads = _fast_path_reads(ops, described, eager)
    step = rebuild(ops, flat[0], handles, functions, reads)
    if step is None:
        return eager

    def node(variable: Any) -> str | None:
        return step.handle_nodes.get(_handle_of(variable))

    again = {model.name: model.created_again for model in eager.variables}
    before = {model.name: model.read_before_tape for model in eager.variables}
    records = [
        TracedVariable(
            replace(
                model,
                unread_by_tape=node(variable) is None and not called_at(variable)[1],
                called_before_tape=called_at(variable)[0] if node(variable) is None else None,
                created_again=again.get(model.name),
                read_before_tape=before.get(model.name) if node(variable) is None else None,
            ),
            node=node(variable),
        )
        for variable, model in described
    ]
    context = [
        TracedVariable(created.describe(v)[1], node=node(v)) for v in others if node(v) is not None
    ]
    result = traced.graph_def_protos(
        step.graph_def,
        step.graphs,
        eager.loss_name,
        records + context,
        step.loss_shape,
        step.loss_tensor,
        locations=step.locations,
    )
    result.context_variables = [r.variable.name for r in context]
    result.tensorflow = eager.tensorflow
    result.eager_fallback = eager
    return result


def _fast_path_reads(
    ops: list[Any], described: list[tuple[Any, Variable]], eager: EagerResult
) -> dict[int, tuple[Any, str]]:
    """Values of requested variables that TensorFlow read in C, without an op the recorder saw
    (`tf.matmul(x, w)`, `tf.stop_gradient(w)` convert `w` in the fast path): for each variable
    no recorded op read, the tensors no recorded op made that hold its dtype, shape and current
    value, when no other such variable matches them. TensorFlow's own verdicts still judge the
    rebuilt step: where the two disagree, TensorFlow's stand."""
    import tensorflow as tf

    read = {id(t) for op in ops for t in op.inputs if getattr(t, "dtype", None) == tf.resource}
    made = {id(t) for op in ops for t in op.outputs}
    unseen = {}
    for op in ops:
        for tensor in op.inputs:
            if id(tensor) not in made and getattr(tensor, "dtype", None) not in (None, tf.resource):
                unseen[id(tensor)] = tensor
    matches: dict[int, list[tuple[Any, str]]] = {}
    for (variable, _), recorded in zip(described, eager.variables):
        # Not even the tape may have seen it: a read for an op without a gradient
        # (`tf.stop_gradient(w)`) is not recorded as an access.
        if _handle_of(variable) in read or not recorded.trainable:
            continue
        value = variable.read_value() if hasattr(variable, "read_value") else None
        if value is None:
            continue
        for key, tensor in unseen.items():
            if tensor.dtype == value.dtype and tensor.shape == value.shape:
                if bool(tf.reduce_all(tf.equal(tensor, value))):
                    matches.setdefault(key, []).append((variable.handle, recorded.name))
    return {key: found[0] for key, found in matches.items() if len(found) == 1}


def read_before(
    created: CreatedVariables,
    tensors: Iterable[Any],
    scope: SourceLocation | None = None,
    computed: Any = None,
) -> dict[int, SourceLocation]:
    """{id of a variable's handle: the first line that read it} for the eager reads the live
    `tensors` were computed from (a value computed before a tape opened or a step was traced):
    of the read's frames, the one in the function of `scope` (the request: the line there that
    called the model), else the innermost. `computed`: a loss the tape saw no op compute
    (`minimize(lambda: cost)`): the line that made it stands for every variable (ALL_VARIABLES),
    whatever it read: the tape took it for a constant."""
    reads = created.reads
    found: dict[int, SourceLocation] = {}
    made = reads.made_at(computed) if computed is not None else None
    pairs = [(t, h, w) for t in tensors for h, w in reads.reads_behind(t)]
    pairs += [(computed, ALL_VARIABLES, made)] if made is not None else []
    for _, handle, where in pairs:
        if where is None:
            continue
        if scope is not None:
            frames = (*where.callers, where)
            where = next(
                (f for f in frames if (f.file, f.function) == (scope.file, scope.function)),
                where,
            )
        if handle not in found or where < found[handle]:
            found[handle] = where
    return found


ALL_VARIABLES = 0  # the key of a line that stands for every variable the request lists


def _created_again(
    listed: list[Any], watched: set[int], created: CreatedVariables, since: int | None
) -> dict[int, SourceLocation]:
    """{id of a listed variable the tape never read: the line that made it, where a later call
    made the variable the tape read in its place}: the same line made both, and either the new
    one after the tape opened (`self.w = tf.Variable(...)` in a call), or the same layer made
    both in two calls of its code (`self.add_weight(...)` in call(): once when a functional
    model is built, again in the step), whether a request lists the new one too or not."""
    order = {id(v): index for index, v in enumerate(created.variables)}
    read = [v for v in created.variables if id(v) in watched and created.at.get(id(v))]
    again = {}
    for variable in listed:
        where = created.at.get(id(variable))
        if id(variable) in watched or where is None:
            continue
        for other in read:
            if created.at[id(other)] != where:
                continue
            in_step = since is not None and order[id(other)] >= since
            if in_step or _another_call_of_its_layer(created, variable, other, order):
                again[id(variable)] = where
                break
    return again


def _another_call_of_its_layer(
    created: CreatedVariables, variable: Any, other: Any, order: dict[int, int]
) -> bool:
    """Whether the Keras layer that made `variable` made `other` later, in another call of its
    code (the user lines that called it differ): not two weights of one loop in one build()."""
    layer = created.keras.owners.get(id(variable))
    if layer is None or created.keras.owners.get(id(other)) != layer:
        return False
    if order.get(id(other), -1) <= order.get(id(variable), -1):
        return False
    calls = [created.at[id(v)] for v in (variable, other)]
    return [c.line for c in calls[0].callers] != [c.line for c in calls[1].callers]


def _all_zeros(gradient: Any) -> bool:
    """A gradient of zeros in this step: `loss * 0.0`, or chance (a ReLU off for the whole
    batch); only a rebuilt graph that shows the cut makes gradcheck call the variable dead."""
    import tensorflow as tf

    return bool(tf.math.count_nonzero(tf.convert_to_tensor(gradient)) == 0)


def _handle_of(variable: Any) -> int:
    """id of the resource handle an eager op reads a variable through."""
    return id(getattr(variable, "handle", variable))


def distinct(requests: list[GradientRequest]) -> list[GradientRequest]:
    """One request per call site and variable list: a step traced twice asks twice."""
    seen: set[tuple[str, SourceLocation | None, tuple[str, ...]]] = set()
    found = []
    for request in requests:
        key = (
            request.api,
            request.location,
            tuple(v.name for v in _requested_variables(request)),
        )
        if key not in seen:
            seen.add(key)
            found.append(request)
    return found


def _requested_variables(request: GradientRequest) -> list[Any]:
    """The variables the request asks gradients for; the others its graph reads (an
    optimizer's, created by the first pass of a loop in the step) do not make it another."""
    result = request.result
    if isinstance(result, EagerResult):
        return list(result.variables)
    context = set(getattr(result, "context_variables", ()))
    return [record.variable for record in result.variables if record.variable.name not in context]
