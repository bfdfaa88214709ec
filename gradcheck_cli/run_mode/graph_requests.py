"""A gradient request made while a step is traced (a tf.function) or built (TF1): its loss and
variables in the graph, snapshotted once per call site and variables."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any, NamedTuple

from gradcheck_cli.graph.model import SourceLocation, TensorFlowVerdict
from gradcheck_cli.run_mode.gradient_requests import (
    CreatedVariables,
    is_graph_variable,
    is_variable,
    read_before,
)
from gradcheck_cli.tracing import traced
from gradcheck_cli.worker.protocol import TensorFlowGradients, TracedGraph, TracedVariable

TRACED_TAPE = "the script's own gradient call, as traced"


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
        if is_variable(x):
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


@dataclass
class GraphRequest:
    """A request made while tracing (a tf.function step) or building (TF1): its loss and
    variables at their nodes in the graph, before the graph is snapshotted."""

    graph: Any
    loss: Any
    label: str
    records: list[TracedVariable]  # the requested variables
    # The script's other variables in the same graph, so that the analysis sees what is
    # trainable upstream of a cut (a teacher under tf.stop_gradient); they are not judged.
    context: list[TracedVariable]

    def requested(self) -> tuple[str, ...]:
        """The names of the variables the request asks gradients for, as its result tells
        them apart from the context (`capture`'s one request per call site and variables)."""
        context = {r.variable.name for r in self.context}
        return tuple(r.variable.name for r in self.records if r.variable.name not in context)

    def snapshot(self) -> TracedGraph:
        """The graph as it is now, as the request's result."""
        result = traced.graph_protos(self.graph, self.loss, self.label, self.records + self.context)
        result.context_variables = [r.variable.name for r in self.context]
        return result

    def probe_only(self) -> None:
        """What a snapshot does to the graph, without the snapshot: the probes of its custom
        gradients leave their ops in it (for a request whose call site and variables were
        snapshotted already, so that the requests after it see the graph as they would)."""
        traced.probe_custom_gradients(self.graph)


class Arguments(NamedTuple):
    """What was passed to a tf.function call (its arguments, nested as given), and the frame
    that called it (suspended at the call while the function is traced)."""

    passed: Any
    caller: FrameType

    def tensors(self) -> list[Any]:
        import tensorflow as tf

        return [t for t in tf.nest.flatten(self.passed) if isinstance(t, tf.Tensor)]

    def called_at(self) -> SourceLocation | None:
        """The script's line that made the call."""
        import traceback

        return traced.user_location(traceback.extract_stack(self.caller))


def graph_request(
    targets: Any,
    variables: list[tuple[int, Any]],
    created: CreatedVariables,
    label: str,
    passed: Sequence[Arguments] = (),
) -> GraphRequest:
    """The loss and variables of a request made while tracing or building, in its graph.
    `passed`: the arguments of the tf.function being traced, if one is (a value computed from
    a variable before the call comes in as an argument: a constant to the tape inside)."""
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
    # A value computed eagerly from a variable before the step was traced (a kernel derived
    # once in build()) is a constant the graph captured: told by the line that read it.
    captured = [external for external, _ in _captures(graph) if external.dtype.name != "resource"]
    read = read_before(created, captured)
    arguments = {}
    for call in passed:
        arguments.update(read_before(created, call.tensors(), call.called_at()))

    def before_the_call(variable: Any) -> SourceLocation | None:
        """Where a value passed in was read from `variable`, if the graph never reads it."""
        if id(variable) in nodes:
            return None
        return arguments.get(id(getattr(variable, "handle", variable)))

    records = [
        TracedVariable(
            replace(
                model,
                read_before_tracing=read.get(id(getattr(v, "handle", v))),
                unread_by_tape=before_the_call(v) is not None,
                read_before_tape=before_the_call(v),
            ),
            node=nodes.get(id(v)),
        )
        for v, model in described
    ]
    context = [
        TracedVariable(created.describe(v)[1], node=nodes[id(v)]) for v in others if id(v) in nodes
    ]
    return GraphRequest(graph, loss, label, records, context)


def _captures(graph: Any) -> list[tuple[Any, Any]]:
    """The (external, internal) tensors `graph` and the functions it calls captured."""
    found = list(getattr(graph, "captures", ()))
    for function in getattr(graph, "_functions", {}).values():
        found += list(getattr(getattr(function, "graph", None), "captures", ()))
    return found


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
        return {id(v): v.op.name for v in variables if is_graph_variable(v) and v.graph is graph}
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


@dataclass
class Snapshots:
    """The requests of one run snapshotted so far, by API, call site and variable names: a
    critic loop asks at the same line for the same variables at each pass, and the run keeps
    the first (`capture`'s one request per call site and variables), so the graph is
    snapshotted once for them."""

    taken: set[tuple[str, SourceLocation | None, tuple[str, ...]]] = field(default_factory=set)

    def take(
        self,
        api: str,
        location: SourceLocation | None,
        targets: Any,
        variables: list[tuple[int, Any]],
        created: CreatedVariables,
        label: str,
        passed: Sequence[Arguments] = (),
    ) -> TracedGraph | None:
        """The request's snapshot; None if its call site and variables were snapshotted."""
        request = graph_request(targets, variables, created, label, passed)
        key = (api, location, request.requested())
        if key in self.taken:
            request.probe_only()
            return None
        self.taken.add(key)
        return request.snapshot()


def bound_arguments(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`function`'s parameters bound to a call's arguments; empty where they do not bind."""
    try:
        return dict(inspect.signature(function).bind(*args, **kwargs).arguments)
    except TypeError:
        return {}


def graph_api() -> str:
    """Which public call reached TensorFlow's graph gradients: an optimizer or tf.gradients."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_name
        if name in ("minimize", "compute_gradients"):
            return f"Optimizer.{name}"
        frame = frame.f_back
    return "tf.gradients"
