"""Turn live TensorFlow objects (a traced function, a TF1 graph) into the worker's traced result."""

from __future__ import annotations

import re
import traceback as traceback_module
from collections.abc import Iterable, Sequence
from typing import Any

from gradcheck_cli.graph.model import CustomGradient, SourceLocation, Variable, make_names_unique
from gradcheck_cli.loaders.debug_info import is_user_file
from gradcheck_cli.loaders.worker_protocol import TracedFunction, TracedGraph, TracedVariable


def user_location(frames: Iterable[Any] | None) -> SourceLocation | None:
    """The innermost frame of user code in a TF op traceback or a Python stack summary."""
    if frames is None:
        return None
    for frame in reversed(list(frames)):
        filename = getattr(frame, "filename", None)
        if filename and is_user_file(filename):
            return SourceLocation(filename, frame.lineno, getattr(frame, "name", None))
    return None


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


def _static_shape(tensor: Any) -> tuple[int | None, ...] | None:
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
        shape=_static_shape(variable),
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
) -> TracedFunction:
    """Protos of `concrete` and the candidate variables, mapped onto its captured arguments.

    `keras_info` maps id(tf variable) to (Keras path, Keras trainable): Keras 3 keeps layer
    trainability on its own variable object, not on the backing tf.Variable.
    """
    from tensorflow.core.framework import function_pb2

    graph = concrete.graph
    fdef = concrete.function_def
    library = function_pb2.FunctionDefLibrary()
    library.CopyFrom(graph.as_graph_def().library)
    existing = {f.signature.name for f in library.function}
    if fdef.signature.name not in existing:
        library.function.add().CopyFrom(fdef)
    arg_of_internal = {id(t): i for i, t in enumerate(graph.inputs)}
    arg_of_handle = {
        id(external): arg_of_internal.get(id(internal)) for external, internal in graph.captures
    }
    variables = candidate_variables(candidates, concrete)
    records = []
    keras_info = keras_info or {}
    created_at = created_at or {}
    for variable in variables:
        keras_path, keras_trainable = keras_info.get(id(variable), (None, variable.trainable))
        records.append(
            TracedVariable(
                model_variable(
                    variable,
                    keras_path or variable_name(variable),
                    bool(keras_trainable),
                    path=(attributes or {}).get(id(variable), keras_path),
                    location=created_at.get(id(variable)),
                ),
                arg_index=arg_of_handle.get(id(variable.handle)),
            )
        )
    make_names_unique(r.variable for r in records)
    graphs = _function_graphs(graph, fdef.signature.name)
    return TracedFunction(
        loss_name=loss_name,
        variables=records,
        library=library.SerializeToString(),
        op_defs=_op_defs(library.function, ()),
        loss_shape=_static_shape(graph.outputs[loss_output]),
        locations=_locations(graphs),
        custom_gradients=_custom_gradients(graphs),
        top_function=fdef.signature.name,
        loss_output=loss_output,
    )


def candidate_variables(candidates: Sequence[Any], concrete: Any) -> list[Any]:
    """The given candidates, then any other variable the function captures, each once."""
    variables: list[Any] = []
    seen: set[int] = set()
    for variable in list(candidates) + list(concrete.variables):
        if id(variable) not in seen:
            seen.add(id(variable))
            variables.append(variable)
    return variables


def _function_graphs(graph: Any, name: str) -> list[tuple[str, Any]]:
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


def _locations(graphs: Iterable[tuple[str, Any]]) -> dict[str, SourceLocation]:
    locations = {}
    for fn_name, graph in graphs:
        for op in graph.get_operations():
            location = user_location(op.traceback)
            if location is not None:
                locations[f"{op.name}@{fn_name}"] = location
    return locations


def _custom_gradients(
    graphs: Iterable[tuple[str, Any]],
) -> dict[str, tuple[CustomGradient, ...]]:
    """Ask the live gradient registry what each custom gradient returns for each input."""
    import tensorflow as tf
    from tensorflow.python.framework import ops

    verdicts: dict[str, tuple[CustomGradient, ...]] = {}
    for _, graph in graphs:
        for op in graph.get_operations():
            try:
                grad_type = op.get_attr("_gradient_op_type").decode()
            except (ValueError, AttributeError):
                continue
            if grad_type in verdicts:
                continue
            try:
                with graph.as_default(), tf.name_scope("gradcheck_probe"):
                    grad_fn = ops.get_gradient_function(op)
                    upstream = [tf.ones_like(out) for out in op.outputs]
                    results = grad_fn(op, *upstream)
            except Exception:  # a gradient function may refuse to run out of its context
                continue
            positions = []
            for result in results:
                if result is None:
                    positions.append(CustomGradient.NONE)
                elif _is_zero_tensor(result):
                    positions.append(CustomGradient.ZERO)
                else:
                    positions.append(CustomGradient.FLOWS)
            verdicts[grad_type] = tuple(positions)
    return verdicts


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
    tensor `loss` and the variables `records`, each at its node in the graph (or none)."""
    graph_def = graph.as_graph_def()
    graphs = [("", graph)]
    for fn_name, function in getattr(graph, "_functions", {}).items():
        inner = getattr(function, "graph", None)
        if inner is not None:
            graphs.extend(_function_graphs(inner, fn_name))
    return TracedGraph(
        loss_name=loss_name,
        variables=records,
        library=graph_def.library.SerializeToString(),
        op_defs=_op_defs(graph_def.library.function, graph_def.node),
        loss_shape=_static_shape(loss),
        locations=_locations(graphs),
        custom_gradients=_custom_gradients(graphs),
        graph_def=graph_def.SerializeToString(),
        loss_tensor=loss.name,
    )
