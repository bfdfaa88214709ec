"""One gradient request of a running script as the worker's result: its loss, its variables."""

from __future__ import annotations

import hashlib
import sys
import traceback
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gradcheck_cli.differentiability.rules import is_trainable_dtype
from gradcheck_cli.graph.model import CreationNames, SourceLocation, TensorFlowVerdict, Variable
from gradcheck_cli.source_code.debug_info import made_by_a_library, with_call_column
from gradcheck_cli.tracing import traced
from gradcheck_cli.tracing.keras_weights import KerasWeights
from gradcheck_cli.tracing.leaving_tensorflow import Leave
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
        return tf_variable, traced.model_variable(tf_variable, name, trainable, location=location)

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
) -> EagerResult:
    """A request made eagerly: TensorFlow's own verdicts, and where a value left TensorFlow."""
    import tensorflow as tf

    flat = tf.nest.flatten(gradients) if gradients is not None else []
    described = [(index, *created.describe(variable)) for index, variable in variables]
    models = [model for _, _, model in described]
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
        reason = "the step runs eagerly, so gradcheck sees no graph to show the cut in"
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
    called_at: Callable[[Any], SourceLocation | None] = lambda _: None,
) -> TracedGraph | EagerResult:
    """An eager request as the graph of the ops its tape recorded, carrying the eager result
    (TensorFlow's verdicts and where a value left TensorFlow) for when the two disagree.
    `called_at(variable)`: where the script last called a layer that owns it (for a variable
    the tape never saw read: a model called before the tape opened)."""
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

    records = [
        TracedVariable(
            replace(
                model,
                unread_by_tape=node(variable) is None,
                called_before_tape=called_at(variable) if node(variable) is None else None,
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


def _all_zeros(gradient: Any) -> bool:
    """A gradient of zeros in this step: `loss * 0.0`, or chance (a ReLU off for the whole
    batch); only a rebuilt graph that shows the cut makes gradcheck call the variable dead."""
    import tensorflow as tf

    return bool(tf.math.count_nonzero(tf.convert_to_tensor(gradient)) == 0)


def _handle_of(variable: Any) -> int:
    """id of the resource handle an eager op reads a variable through."""
    return id(getattr(variable, "handle", variable))


@dataclass
class Untrained:
    """The trainable variables the script created that no gradient request differentiates."""

    variables: list[Variable]
    # (name, why) of those left out as a library's bookkeeping (GC009).
    left_out: list[tuple[str, str]]
    # (name, the name of the requested variable whose values it holds): copies (GC214).
    copies: list[tuple[str, str]]
    # Names of those a model holds, read as a fixed model: no request lists any variable a
    # model holds (the requests optimise inputs, as style transfer does).
    fixed: list[str] = field(default_factory=list)


def untrained(created: CreatedVariables, requested: set[int]) -> Untrained:
    """Trainable variables the script created that no gradient request differentiates; an
    integer variable (a counter, `tf.Variable(0)` left trainable) can never train and is no
    candidate. Those that hold the values of a requested variable (a target network, an EMA
    teacher: values equal now, before any weight changed) are told apart as copies."""
    from gradcheck_cli.tracing.keras_weights import (
        discarded_layer_weights,
        left_out_of_candidates,
        owned_variables,
        smallest_holders,
    )

    # What a library made for itself and no model of the script holds: an optimizer's or a
    # metric's variables, TF-MOT's discarded clones.
    main = vars(sys.modules["__main__"])
    discarded = discarded_layer_weights(created.keras)
    owned = owned_variables(main, created.keras, discarded)
    libraries = created.by_libraries - owned
    found = []
    unchecked = []
    for variable in created.variables:
        if id(variable) in requested or id(variable) in created.bookkeeping:
            continue
        if id(variable) in libraries:
            unchecked.append(variable)
            continue
        _, model = created.describe(variable)
        if model.trainable and is_trainable_dtype(model.dtype):
            found.append((variable, model))
    listed = [v for v in created.variables if id(v) in requested]
    holders = smallest_holders(main, created.keras)
    groups = _layer_then_model(created, {v: holder for v, (holder, _) in holders.items()})
    positions = {v: position for v, (_, position) in holders.items()}
    sources = copied_values([v for v, _ in found], listed, groups, positions)
    models = [model for _, model in found]
    names = {id(v): model.name for (v, _), model in zip(found, models)}
    requested_names = {id(v): created.describe(v)[1].name for v in listed}
    copies = [(names[i], requested_names[s]) for i, s in sources.items()]
    left = [model for (v, _), model in zip(found, models) if id(v) not in sources]
    told = left_out_of_candidates(unchecked, discarded, created.names, created.at)
    # Where no request lists a variable that a model holds (an image optimised through a
    # fixed feature extractor), the models the loss reads are fixed by the script's design.
    inputs_only = bool(listed) and not any(id(v) in owned for v in listed)
    fixed = [names[id(v)] for v, _ in found if inputs_only and id(v) in owned]
    return Untrained(left, told, copies, [name for name in fixed if name in {m.name for m in left}])


def _layer_then_model(
    created: CreatedVariables, holders: dict[int, int]
) -> Callable[[Any], tuple[Hashable, ...]]:
    """What a variable's constant value is judged with: its layer (else its creation line),
    then the model that holds it."""

    def keys(variable: Any) -> tuple[Hashable, ...]:
        owner = created.keras.owners.get(id(variable))
        if owner is not None:
            layer: Hashable = ("layer", owner)
        elif (where := created.at.get(id(variable))) is not None:
            layer = ("line", where.file, where.line)
        else:
            layer = ("variable", id(variable))
        holder = holders.get(id(variable))
        return layer, ("model", holder) if holder is not None else ("variable", id(variable))

    return keys


def copied_values(
    untrained: Sequence[Any],
    listed: Sequence[Any],
    groups: Callable[[Any], tuple[Hashable, ...]],
    positions: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """{id of an `untrained` variable: id of the `listed` one whose values it holds}. A value
    that varies (random weights) is a copy when a listed variable holds exactly its bytes; a
    constant one (a zero bias, a batch norm's scale of ones) proves nothing alone, and counts
    when a variable of one of its `groups` (its layer, then its model) copies a varying value
    of the group its own source is in; of equal sources, the one at its own position in its
    model (`positions`: a variable's index in its model's list) is named."""
    import numpy
    import tensorflow as tf

    def key(variable: Any) -> tuple[tuple[Any, ...], bool] | None:
        try:
            with tf.init_scope():  # the values now, even while a step is traced
                value = numpy.ascontiguousarray(variable.numpy())
        except Exception:  # a variable whose value cannot be read here
            return None
        digest = hashlib.sha256(value.tobytes()).digest()
        varies = value.size > 1 and bool(numpy.any(value != value.flat[0]))
        return (str(variable.dtype), value.shape, digest), varies

    shapes = {tuple(variable.shape) for variable in untrained}
    held: dict[tuple[Any, ...], list[Any]] = {}
    for variable in listed:
        if tuple(variable.shape) in shapes and (found := key(variable)) is not None:
            held.setdefault(found[0], []).append(variable)
    copies: dict[int, int] = {}
    constants: list[tuple[Any, list[Any]]] = []
    # the group of each copy -> the groups of the variables it copies
    copied_groups: dict[Hashable, set[Hashable]] = {}
    for variable in untrained:
        found = key(variable)
        if found is None or found[0] not in held:
            continue
        if found[1]:
            source = held[found[0]][0]
            copies[id(variable)] = id(source)
            for mine, theirs in zip(groups(variable), groups(source)):
                copied_groups.setdefault(mine, set()).add(theirs)
        else:
            constants.append((variable, held[found[0]]))
    for variable, sources in constants:
        for level, mine in enumerate(groups(variable)):
            of = copied_groups.get(mine, set())
            mine_at = (positions or {}).get(id(variable))
            source = min(
                (s for s in sources if groups(s)[level] in of),
                key=lambda s: (positions or {}).get(id(s)) != mine_at,
                default=None,
            )
            if source is not None:
                copies[id(variable)] = id(source)
                break
    return copies


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
