"""Turn live TensorFlow objects (a traced function, a TF1 graph) into the worker's traced result."""

from __future__ import annotations

import re
import traceback as traceback_module
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from gradcheck_cli.differentiability.registry import load_registry
from gradcheck_cli.graph.memory import without_cyclic_gc
from gradcheck_cli.graph.model import CreationNames, CustomGradient, SourceLocation, Variable
from gradcheck_cli.source_code.debug_info import (
    ENTRY_FRAMES,
    innermost_with_callers,
    is_user_file,
    library_entry,
)
from gradcheck_cli.tracing.keras_operations import replayed_at
from gradcheck_cli.worker.protocol import TracedFunction, TracedGraph, TracedVariable


def user_location(frames: Iterable[Any] | None) -> SourceLocation | None:
    """The innermost frame of user code in a TF op traceback or a Python stack summary, with
    the user frames that called it."""
    if frames is None:
        return None
    located = []
    after: list[tuple[str, str]] = []  # the library frames past the innermost user frame
    # Called for every op of a traced function; each frame's attribute is a C++ call: read once.
    for frame in frames:
        filename = getattr(frame, "filename", None)
        if filename and is_user_file(filename):
            located.append((filename, frame.lineno, getattr(frame, "name", None)))
            after = []
        elif filename and len(after) < ENTRY_FRAMES:
            after.append((filename, getattr(frame, "name", "")))
    return innermost_with_callers(located, library_entry(after) if located else None)


def exception_location(error: BaseException) -> SourceLocation | None:
    """Where the user's code raised `error`; autograph errors name the original line in text."""
    for filename, line in reversed(_AUTOGRAPH_FRAME.findall(str(error))):
        if is_user_file(filename):
            return SourceLocation(filename, int(line))
    return user_location(traceback_module.extract_tb(error.__traceback__))


def error_summary(error: BaseException) -> str:
    """The last line of an error, where TensorFlow puts the underlying message."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


_AUTOGRAPH_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def variable_name(variable: Any) -> str:
    return variable.name.split(":")[0]


Shape = tuple[int | None, ...] | None  # a static shape's dimensions; None: an unknown rank


def static_shape(tensor: Any) -> Shape:
    shape = tensor.shape
    return None if shape.rank is None else tuple(shape.as_list())


def model_variable(
    variable: Any,
    name: str,
    trainable: bool,
    *,
    path: str | None = None,
    location: SourceLocation | None = None,
) -> Variable:
    """The graph model's record of a live tf.Variable; its `source` is set by the graph builder."""
    return Variable(
        name=name,
        trainable=trainable,
        dtype=variable.dtype.base_dtype.name,
        shape=static_shape(variable),
        source=None,
        path=path,
        location=location,
    )


# -- TF2: a concrete function --------------------------------------------------------------------


def traced_function(
    concrete: Any,
    loss_name: str,
    loss_output: int,
    candidates: Sequence[Any],
    *,
    created_at: dict[int, SourceLocation | None] | None = None,
    keras_info: dict[int, tuple[str, bool]] | None = None,
    attributes: dict[int, str] | None = None,
    left_out: Collection[int] = (),
    names: CreationNames | None = None,
) -> TracedFunction:
    """Protos of `concrete` and the candidate variables, mapped onto its captured arguments.

    `keras_info`: id(tf variable) -> (Keras path, Keras trainable), as Keras 3 keeps layer
    trainability on its own variable; `names`: the script's names, else told apart as asked.
    """
    from tensorflow.core.framework import function_pb2

    graph = concrete.graph
    fdef = concrete.function_def
    library = function_pb2.FunctionDefLibrary()
    library.CopyFrom(graph.as_graph_def().library)
    existing = {f.signature.name for f in library.function}
    if fdef.signature.name not in existing:
        library.function.add().CopyFrom(fdef)
    from gradcheck_cli.tracing.override_maps import mark_missed_overrides

    for function in library.function:
        if function.signature.name == fdef.signature.name:
            mark_missed_overrides(graph, function.node_def)
    arg_of_internal = {id(t): i for i, t in enumerate(graph.inputs)}
    arg_of_handle = {
        id(external): arg_of_internal.get(id(internal)) for external, internal in graph.captures
    }
    variables = candidate_variables(candidates, concrete, left_out)
    records, names = [], names or CreationNames.as_asked()
    keras_info = keras_info or {}
    created_at = created_at or {}
    for variable in variables:
        keras_path, keras_trainable = keras_info.get(id(variable), (None, variable.trainable))
        records.append(
            TracedVariable(
                model_variable(
                    variable,
                    names.name(variable, keras_path or variable_name(variable)),
                    bool(keras_trainable),
                    path=(attributes or {}).get(id(variable), keras_path),
                    location=created_at.get(id(variable)),
                ),
                arg_index=arg_of_handle.get(id(variable.handle)),
            )
        )
    graphs = function_graphs(graph, fdef.signature.name)
    custom_gradients, notes = _custom_gradients(graphs)
    return TracedFunction(
        loss_name=loss_name,
        variables=records,
        library=library.SerializeToString(),
        op_defs=_op_defs(library.function, ()),
        loss_shape=static_shape(graph.outputs[loss_output]),
        locations=_locations(graphs),
        output_shapes=output_shapes(graphs),
        custom_gradients=custom_gradients,
        notes=notes,
        top_function=fdef.signature.name,
        loss_output=loss_output,
    )


def candidate_variables(
    candidates: Sequence[Any], concrete: Any, left_out: Collection[int] = ()
) -> list[Any]:
    """The given candidates, then any other variable the function captures, each once; never
    one whose id is `left_out` (a library's bookkeeping that cannot train)."""
    variables: list[Any] = []
    seen: set[int] = set(left_out)
    for variable in list(candidates) + list(concrete.variables):
        if id(variable) not in seen:
            seen.add(id(variable))
            variables.append(variable)
    return variables


def function_graphs(graph: Any, name: str) -> list[tuple[str, Any]]:
    """(function name, FuncGraph) for the top graph and every function defined inside it."""
    found = [(name, graph)]
    seen = {name}
    index = 0
    while index < len(found):
        _, current = found[index]
        index += 1
        for fn_name, function in list(getattr(current, "_functions", {}).items()):
            inner = getattr(function, "graph", None)
            if inner is not None and fn_name not in seen:
                seen.add(fn_name)
                found.append((fn_name, inner))
    return found


def _locations(
    graphs: Iterable[tuple[str, Any]], attributed: Mapping[str, Collection[str]] | None = None
) -> dict[str, SourceLocation]:
    locations = {}
    for fn_name, graph in graphs:
        for op, (location, _) in _op_facts(graph, (attributed or {}).get(fn_name)):
            if location is not None:
                locations[f"{op.name}@{fn_name}"] = location
    return locations


_OpFacts = tuple[SourceLocation | None, str | None]
_FACTS: weakref.WeakKeyDictionary[Any, dict[str, _OpFacts]] = weakref.WeakKeyDictionary()
"""Per graph, op name -> (the user's location of the op, its custom gradient's type), read
once per op: a step with several requests is snapshotted at each, every time the same ops."""


def _op_facts(
    graph: Any, attributed: Collection[str] | None = None
) -> Iterator[tuple[Any, _OpFacts]]:
    """(op, its facts) for every op of `graph`, in the graph's order. `attributed`: the ops
    with a `_gradient_op_type`, if known (from a GraphDef): asking an op for an attribute it
    lacks raises, which costs tens of microseconds in a deep tracing stack."""
    known = _kept_for(graph, _FACTS)
    for op in graph.get_operations():
        facts = known.get(op.name)
        if facts is None:
            marked = attributed is None or op.name in attributed
            grad_type = _gradient_op_type(op) if marked else None
            located = replayed_at(graph, op.name) or _trace_location(op.traceback)
            facts = known[op.name] = (located, grad_type)
        yield op, facts


def _trace_location(trace: Any) -> SourceLocation | None:
    """`user_location` of an op's traceback, once per distinct text (TensorFlow's C++ makes
    it in a fraction of the time a walk over the frames takes): the 9478 ops of a CycleGAN
    step's four tapes have 814."""
    if trace is None:
        return None
    text = str(trace)
    if text in _LOCATION_OF_TRACE:
        return _LOCATION_OF_TRACE[text]
    if len(_LOCATION_OF_TRACE) >= _MOST_TRACES:
        _LOCATION_OF_TRACE.clear()
    location = _LOCATION_OF_TRACE[text] = user_location(trace)
    return location


_LOCATION_OF_TRACE: dict[str, SourceLocation | None] = {}
_MOST_TRACES = 1 << 16


def output_shapes(graphs: Iterable[tuple[str, Any]]) -> dict[str, tuple[Shape, ...]]:
    """Static output shapes by "node@function", for the ops whose shapes advice relies on; a
    fully known shape stays (`set_shape` only refines), so it is read at one snapshot only."""
    shapes = {}
    for fn_name, graph in graphs:
        known = _kept_for(graph, _SHAPES)
        for op in graph.get_operations():
            name = op.name
            found = known.get(name)
            if found is None:
                found = tuple(map(_shape_of, op.outputs))
                if all(shape is not None and None not in shape for shape in found):
                    known[name] = found
            shapes[f"{name}@{fn_name}"] = found
    return shapes


def _shape_of(tensor: Any) -> Shape:
    # A graph tensor's `_shape_tuple` reads what `shape.as_list()` does, in a third of the time.
    read = getattr(tensor, "_shape_tuple", None)
    return read() if read is not None else static_shape(tensor)  # type: ignore[no-any-return]


_SHAPES: weakref.WeakKeyDictionary[Any, dict[str, tuple[Shape, ...]]] = weakref.WeakKeyDictionary()
"""Per graph, op name -> its outputs' static shapes, once every one of them is fully known."""


def _custom_gradients(
    graphs: Iterable[tuple[str, Any]], attributed: Mapping[str, Collection[str]] | None = None
) -> tuple[dict[str, tuple[CustomGradient, ...]], list[str]]:
    """Ask the live gradient registry what each custom gradient (a `tf.custom_gradient`, a
    `gradient_override_map` name registered by the user) returns for each input, with a note for
    each one that cannot be run here.

    Override names TensorFlow itself registers (`{"Round": "Identity"}`) are left to the
    differentiability rules, which read them from the registry snapshot as in a SavedModel. A
    gradient the probe cannot run is assumed to flow, and said so: the probe never fails the
    analysis.
    """
    registry = load_registry()
    verdicts: dict[str, tuple[CustomGradient, ...]] = {}
    refused: dict[str, tuple[Any, str]] = {}
    for fn_name, graph in graphs:
        probed = _kept_for(graph, _PROBED)
        for op, (_, grad_type) in _op_facts(graph, (attributed or {}).get(fn_name)):
            if grad_type is None or grad_type in verdicts or registry.has_entry(grad_type):
                continue
            try:
                if op.name not in probed:
                    probed[op.name] = _probe_gradient(op)
                verdicts[grad_type] = probed[op.name]
            except Exception as error:  # a gradient function may refuse to run out of context
                refused.setdefault(grad_type, (op, error_summary(error)))
    notes = [
        f"the gradient {grad_type} of {op.name} ({op.type}) could not be run outside "
        f"tf.gradients ({why}); its inputs are assumed to receive gradient"
        for grad_type, (op, why) in refused.items()
        if grad_type not in verdicts
    ]
    return verdicts, notes


_PROBED: weakref.WeakKeyDictionary[Any, dict[str, tuple[CustomGradient, ...]]] = (
    weakref.WeakKeyDictionary()
)
"""Per graph, op name -> what its custom gradient gave when probed: each snapshot of a step
with several gradient requests asks again, and a probe builds ops (a Keras optimizer's
all-reduce has a custom gradient whose gradient has one too)."""


_Kept = TypeVar("_Kept")


def _kept_for(
    graph: Any, kept: weakref.WeakKeyDictionary[Any, dict[str, _Kept]]
) -> dict[str, _Kept]:
    """`graph`'s entry in one of the caches above."""
    try:
        return kept.setdefault(graph, {})
    except TypeError:  # a graph-like object that cannot be weakly referenced
        return {}


_GRADIENT_OP_TYPE = "_gradient_op_type"


def _gradient_op_type(op: Any) -> str | None:
    """The gradient type `tf.custom_gradient` or `gradient_override_map` set on `op`, if any."""
    try:
        raw = op.get_attr(_GRADIENT_OP_TYPE)
    except (ValueError, AttributeError):
        return None
    try:
        return raw.decode() or None
    except (AttributeError, UnicodeDecodeError):
        return None


def _probe_gradient(op: Any) -> tuple[CustomGradient, ...]:
    """Run the gradient function TensorFlow would pick for `op` on all-ones upstream gradients,
    in `op`'s own graph (the user's, default or not), and classify what it returns per input."""
    import tensorflow as tf
    from tensorflow.python.framework import ops

    graph = op.graph
    # Everything the probe builds or inspects stays inside `graph.as_default()`: outside it, in
    # an eager program, touching a graph tensor (even iterating over it) means capturing it.
    with graph.as_default(), tf.name_scope("gradcheck_probe"):
        grad_fn = ops.get_gradient_function(op)
        if grad_fn is None:  # registered with tf.no_gradient: tf.gradients gives None to all
            return (CustomGradient.NONE,) * len(op.inputs)
        upstream = [tf.ones_like(out) for out in op.outputs]
        results = grad_fn(op, *upstream)
        # TensorFlow accepts one tensor for a one-input op (`_IdGrad` returns `grad` itself).
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        if len(results) != len(op.inputs):
            raise ValueError(
                f"the gradient returns {len(results)} values for {len(op.inputs)} inputs"
            )
        return tuple(_gradient_verdict(result) for result in results)


def _gradient_verdict(result: Any) -> CustomGradient:
    if result is None:
        return CustomGradient.NONE
    if _is_zero_tensor(result):
        return CustomGradient.ZERO
    return CustomGradient.FLOWS


def _is_zero_tensor(tensor: Any) -> bool:
    import numpy as np
    from tensorflow.python.framework import tensor_util

    op = getattr(tensor, "op", None)
    while op is not None and op.type == "Identity":
        op = op.inputs[0].op
    if op is None:
        return False
    if op.type == "ZerosLike":
        return True
    if op.type in ("Const", "Fill"):
        value = tensor_util.constant_value(op.outputs[0])
        return value is not None and not np.any(value)
    return False


def _op_defs(functions: Iterable[Any], nodes: Iterable[Any]) -> bytes:
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.framework import op_def_registry

    types: set[str] = {node.op for node in nodes}
    for function in functions:
        types.update(node.op for node in function.node_def)
    op_list = op_def_pb2.OpList()
    for op_type in sorted(types):
        op_def = op_def_registry.get(op_type)
        if op_def is not None:
            op_list.op.add().CopyFrom(op_def)
    return op_list.SerializeToString()


# -- TF1: a graph --------------------------------------------------------------------------------


def traced_graph(graph: Any, loss: Any, loss_name: str) -> TracedGraph:
    """Protos of a TF1 graph and its variable collections, with the loss tensor `loss`."""
    import tensorflow as tf

    trainable = graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
    trainable_ids = {id(v) for v in trainable}
    everything = trainable + [
        v
        for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
        if id(v) not in trainable_ids
    ]
    records = [
        TracedVariable(
            model_variable(
                variable,
                variable.op.name,
                id(variable) in trainable_ids,
                location=user_location(variable.op.traceback),
            ),
            node=variable.op.name,
        )
        for variable in everything
    ]
    return graph_protos(graph, loss, loss_name, records)


def graph_protos(
    graph: Any, loss: Any, loss_name: str, records: list[TracedVariable]
) -> TracedGraph:
    """Protos of `graph` (a TF1 graph, or a function graph as it is being traced) with the loss
    tensor `loss` and the variables `records`, each at its node in the graph (or none).

    Taken with the cyclic collector paused: the script's heap (TensorFlow, Keras, the traced
    step) is millions of objects that a full collection walks, while the snapshot's own
    objects live until they are written or die by reference counting."""
    from gradcheck_cli.tracing.override_maps import mark_missed_overrides

    with without_cyclic_gc():
        graphs = _graph_and_functions(graph)
        graph_def = graph.as_graph_def()
        mark_missed_overrides(graph, graph_def.node)
        # The GraphDef holds each op's attributes: the ops with a custom gradient's type.
        marked = {"": {node.name for node in graph_def.node if _GRADIENT_OP_TYPE in node.attr}}
        shape = static_shape(loss)
        return graph_def_protos(graph_def, graphs, loss_name, records, shape, loss.name, marked)


def probe_custom_gradients(graph: Any) -> None:
    """Probe the custom gradients of `graph` as `graph_protos` does, without its protos."""
    with without_cyclic_gc():
        _custom_gradients(_graph_and_functions(graph))


def _graph_and_functions(graph: Any) -> list[tuple[str, Any]]:
    graphs = [("", graph)]
    for fn_name, function in getattr(graph, "_functions", {}).items():
        inner = getattr(function, "graph", None)
        if inner is not None:
            graphs.extend(function_graphs(inner, fn_name))
    return graphs


def graph_def_protos(
    graph_def: Any,
    graphs: list[tuple[str, Any]],
    loss_name: str,
    records: list[TracedVariable],
    loss_shape: tuple[int | None, ...] | None,
    loss_tensor: str,
    attributed: Mapping[str, Collection[str]] | None = None,
    locations: dict[str, SourceLocation] | None = None,
) -> TracedGraph:
    """Protos of a GraphDef whose lines and custom gradients come from the live `graphs`
    ((function name, graph), "" for the top graph) and from `locations` ("node@function");
    `attributed`: as `_op_facts`', by function name."""
    custom_gradients, notes = _custom_gradients(graphs, attributed)
    return TracedGraph(
        loss_name=loss_name,
        variables=records,
        library=graph_def.library.SerializeToString(),
        op_defs=_op_defs(graph_def.library.function, graph_def.node),
        loss_shape=loss_shape,
        locations={**_locations(graphs, attributed), **(locations or {})},
        output_shapes=output_shapes(graphs),
        custom_gradients=custom_gradients,
        notes=notes,
        graph_def=graph_def.SerializeToString(),
        loss_tensor=loss_tensor,
    )
