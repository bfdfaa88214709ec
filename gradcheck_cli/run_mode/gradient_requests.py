"""One gradient request of a running script as the worker's result: its loss, its variables."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gradcheck_cli.differentiability.rules import is_trainable_dtype
from gradcheck_cli.graph.model import SourceLocation, TensorFlowVerdict, Variable, make_names_unique
from gradcheck_cli.tracing import traced
from gradcheck_cli.tracing.keras_weights import KerasWeights
from gradcheck_cli.tracing.leaving_tensorflow import Leave
from gradcheck_cli.worker.protocol import (
    EagerResult,
    TensorFlowGradients,
    TracedGraph,
    TracedVariable,
)

TRACED_TAPE = "the script's own gradient call, as traced"
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
    # ids of the variables a library made (traced.made_by_a_library): its bookkeeping unless
    # a model, layer or module of the script owns them
    by_libraries: set[int] = field(default_factory=set)

    def add(self, variable: Any) -> None:
        self.variables.append(variable)
        stack = traceback.extract_stack()[:-2]
        self.at[id(variable)] = traced.user_location(stack)
        if _made_by_a_strategy(stack):
            self.bookkeeping.add(id(variable))
        if traced.made_by_a_library(stack):
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
            name, trainable = self.keras.path(keras_variable), bool(keras_variable.trainable)
        else:
            name, trainable = traced.variable_name(tf_variable), bool(tf_variable.trainable)
            owner = self.owners.get(id(tf_variable))
            if owner and "/" not in name:  # `self.w = tf.Variable(...)` in a tf.Module
                name = f"{owner}/{name}"
        location = self.keras.constructed_at.get(id(tf_variable)) or self.at.get(id(tf_variable))
        if location is None and _is_graph_variable(tf_variable):
            location = traced.user_location(tf_variable.op.traceback)
        return tf_variable, traced.model_variable(tf_variable, name, trainable, location=location)


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


def _is_variable(value: Any) -> bool:
    import tensorflow as tf

    return isinstance(backing(value), tf.Variable)


def _is_graph_variable(variable: Any) -> bool:
    try:
        return variable.op is not None and not variable.op.graph.building_function
    except (AttributeError, RuntimeError):
        return False


def variables_of(sources: Any) -> list[tuple[int, Any]]:
    """(position in the flat sources, variable) for each variable among a tape's sources."""
    import tensorflow as tf

    return [(i, s) for i, s in enumerate(tf.nest.flatten(sources)) if _is_variable(s)]


def graph_variables_of(xs: Any) -> list[tuple[int, Any]]:
    """Like `variables_of` for tf.gradients' `xs`, which may also be a variable's tensors."""
    import tensorflow as tf

    flat = tf.nest.flatten(xs)
    by_tensor: dict[str, Any] = {}
    graphs = {id(x.graph): x.graph for x in flat if isinstance(x, tf.Tensor)}
    for graph in graphs.values():
        for variable in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
            for tensor in _tensors_of(variable):
                by_tensor[tensor] = variable
    found = []
    for i, x in enumerate(flat):
        if _is_variable(x):
            found.append((i, x))
        elif isinstance(x, tf.Tensor) and x.name in by_tensor:
            found.append((i, by_tensor[x.name]))
    return found


def _tensors_of(variable: Any) -> list[str]:
    names = []
    for attribute in ("handle", "_snapshot", "_variable"):
        tensor = getattr(variable, attribute, None)
        name = getattr(tensor, "name", None)
        if isinstance(name, str):
            names.append(name)
    try:
        names.append(variable.op.outputs[0].name)
    except (AttributeError, IndexError):
        pass
    return names


def graph_request(
    targets: Any, variables: list[tuple[int, Any]], created: CreatedVariables, label: str
) -> TracedGraph:
    """The graph of a request made while tracing (a tf.function step) or building (TF1)."""
    import tensorflow as tf

    flat = [t for t in tf.nest.flatten(targets) if isinstance(t, tf.Tensor)]
    graph = flat[0].graph
    loss = flat[0]
    if len(flat) > 1:  # TensorFlow differentiates the sum of the targets
        with graph.as_default(), tf.name_scope("gradcheck_sum"):
            loss = tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32)) for t in flat])
    described = [created.describe(variable) for _, variable in variables]
    requested = {id(v) for v, _ in described}
    others = [v for v in _graph_variables(graph, created) if id(v) not in requested]
    nodes = _variable_nodes(graph, [v for v, _ in described] + others)
    records = [TracedVariable(model, node=nodes.get(id(v))) for v, model in described]
    # The script's other variables in the same graph, so that the analysis sees what is
    # trainable upstream of a cut (a teacher under tf.stop_gradient); they are not judged.
    context = [
        TracedVariable(created.describe(v)[1], node=nodes[id(v)]) for v in others if id(v) in nodes
    ]
    make_names_unique(r.variable for r in records + context)
    result = traced.graph_protos(graph, loss, label, records + context)
    result.context_variables = [r.variable.name for r in context]
    return result


def _graph_variables(graph: Any, created: CreatedVariables) -> list[Any]:
    """Every variable the script created, and a TF1 graph's own variables."""
    import tensorflow as tf

    found = list(created.variables)
    if not getattr(graph, "building_function", True):
        found += graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    return found


def _variable_nodes(graph: Any, variables: list[Any]) -> dict[int, str]:
    """id(tf.Variable) -> its node in `graph`: the placeholder that captures its handle in a
    function graph (through every enclosing function), or its own node in a TF1 graph."""
    from tensorflow.python.framework.func_graph import FuncGraph

    if not isinstance(graph, FuncGraph):
        return {id(v): v.op.name for v in variables if _is_graph_variable(v) and v.graph is graph}
    outer_of: list[dict[int, Any]] = []
    enclosing = graph.outer_graph
    while isinstance(enclosing, FuncGraph):
        outer_of.append({id(internal): external for external, internal in enclosing.captures})
        enclosing = enclosing.outer_graph
    node_of_handle: dict[int, str] = {}
    for external, internal in graph.captures:
        for level in outer_of:
            external = level.get(id(external), external)
        node_of_handle[id(external)] = internal.op.name
    found = {}
    for variable in variables:
        node = node_of_handle.get(id(getattr(variable, "handle", None)))
        if node is not None:
            found[id(variable)] = node
    return found


def with_tensorflow_verdicts(
    result: TracedGraph, variables: list[tuple[int, Any]], gradients: Any
) -> TracedGraph:
    """Attach TensorFlow's own answer to the request: which variables got no gradient at all."""
    verdicts = _symbolic_verdicts(result.variables, variables, gradients)
    result.tensorflow = TensorFlowGradients(TRACED_TAPE, verdicts)
    return result


def _symbolic_verdicts(
    records: list[TracedVariable], variables: list[tuple[int, Any]], gradients: Any
) -> dict[str, TensorFlowVerdict]:
    import tensorflow as tf

    flat = tf.nest.flatten(gradients) if gradients is not None else []
    verdicts = {}
    for record, (index, _) in zip(records, variables):
        if not record.variable.trainable:
            continue
        gradient = flat[index] if index < len(flat) else None
        verdicts[record.variable.name] = (
            TensorFlowVerdict.NONE if gradient is None else TensorFlowVerdict.GRADIENT
        )
    return verdicts


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
    # Eager variables often share TensorFlow's name ("Variable"): key verdicts by unique names.
    make_names_unique(models)
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
                name=recorded.name,
                unread_by_tape=node(variable) is None,
                called_before_tape=called_at(variable) if node(variable) is None else None,
            ),
            node=node(variable),
        )
        for (variable, model), recorded in zip(described, eager.variables)
    ]
    context = [
        TracedVariable(created.describe(v)[1], node=node(v)) for v in others if node(v) is not None
    ]
    make_names_unique(r.variable for r in records + context)
    result = traced.graph_def_protos(
        step.graph_def,
        step.graphs,
        eager.loss_name,
        records + context,
        step.loss_shape,
        step.loss_tensor,
        step.locations,
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


def untrained(created: CreatedVariables, requested: set[int]) -> list[Variable]:
    """Trainable variables the script created that no gradient request differentiates; an
    integer variable (a counter, `tf.Variable(0)` left trainable) can never train and is no
    candidate."""
    from gradcheck_cli.tracing.keras_weights import owned_variables, sources_of_copies

    # What a library made for itself and no model of the script holds: an optimizer's or a
    # metric's variables, TF-MOT's discarded clones.
    main = vars(sys.modules["__main__"])
    skipped = created.bookkeeping | (created.by_libraries - owned_variables(main, created.keras))
    found = []
    for variable in created.variables:
        if id(variable) in requested or id(variable) in skipped:
            continue
        _, model = created.describe(variable)
        if model.trainable and is_trainable_dtype(model.dtype):
            found.append((variable, model))
    listed = [v for v in created.variables if id(v) in requested]
    copied = sources_of_copies([variable for variable, _ in found], listed, created.at)
    left = [model for variable, model in found if id(variable) not in copied]
    make_names_unique(left)
    return left
