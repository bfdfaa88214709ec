"""TensorFlow's own verdict on a loss (`--verify`, the eager fallback): which variables get no
gradient, or one that is zero on every random input. Imports TensorFlow; runs in the worker.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import TensorFlowVerdict
from gradcheck_cli.worker.protocol import TensorFlowGradients, TracedGraph

TAPE = "tf.GradientTape"
SAVED_MODEL_TAPE = "tf.saved_model.load + tf.GradientTape"
TF1_SESSION = "tf.gradients + tf.compat.v1.Session"


def gradient_verdicts(tape: Any, result: Any, variables: list[Any]) -> list[TensorFlowVerdict]:
    """One tape.gradient call for all variables: a persistent tape fails on restored While loops."""
    import numpy as np
    import tensorflow as tf

    if not isinstance(result, (tf.Tensor, tf.Variable)):
        return [TensorFlowVerdict.NONE] * len(variables)
    gradients = tape.gradient(result, variables, unconnected_gradients=tf.UnconnectedGradients.NONE)
    verdicts = []
    for gradient in gradients:
        if gradient is None:
            verdicts.append(TensorFlowVerdict.NONE)
            continue
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        verdicts.append(
            TensorFlowVerdict.ZERO if not np.any(gradient.numpy()) else TensorFlowVerdict.GRADIENT
        )
    return verdicts


def call_with_random_inputs(function: Any, concrete: Any) -> Any:
    """Call `function` on random tensors shaped by `concrete`'s input signature."""
    args, kwargs = random_inputs(concrete)
    return function(*args, **kwargs)


def random_inputs(concrete: Any) -> tuple[list[Any], dict[str, Any]]:
    """Random arguments for `concrete`'s input signature, new values on every call."""
    import numpy as np
    import tensorflow as tf

    args, kwargs = concrete.structured_input_signature
    rng = np.random.default_rng(next(_SEEDS))
    values = [
        tf.constant(random_value(spec.shape, spec.dtype, rng))
        for spec in tf.nest.flatten((args, kwargs))
    ]
    packed_args, packed_kwargs = tf.nest.pack_sequence_as(
        (args, kwargs), values, expand_composites=True
    )
    return list(packed_args), dict(packed_kwargs)


_SEEDS = itertools.count()


def random_value(shape: Any, dtype: Any, rng: Any) -> Any:
    """A NumPy value for a tensor of `shape` (unknown sizes become 2) and TensorFlow `dtype`."""
    import numpy as np

    sizes = [2 if d is None else d for d in shape.as_list()] if shape.rank is not None else []
    numpy_dtype = dtype.as_numpy_dtype
    if dtype.is_floating:
        return rng.normal(size=sizes).astype(numpy_dtype)
    if dtype.is_integer:
        return rng.integers(0, 2, size=sizes).astype(numpy_dtype)
    if dtype.is_bool:
        return rng.random(size=sizes) > 0.5
    return np.zeros(sizes, numpy_dtype)


def tape_verdicts(
    compute: Any, variables: list[Any], names: list[str]
) -> dict[str, TensorFlowVerdict]:
    """TensorFlow's verdict per variable: none, zero (all zeros on every run) or gradient.

    A gradient can be zero by value on one random input (a cond that took the other branch), so
    "zero" must hold on several runs with different inputs.
    """
    import tensorflow as tf

    verdicts: dict[str, TensorFlowVerdict] = {}
    for run in range(_RUNS):
        tf.random.set_seed(run)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            for variable in variables:
                tape.watch(variable)
            result = compute()
        for name, verdict in zip(names, gradient_verdicts(tape, result, variables)):
            verdicts[name] = _combine(verdicts.get(name), verdict)
    return verdicts


_RUNS = 3


def _combine(before: TensorFlowVerdict | None, now: TensorFlowVerdict) -> TensorFlowVerdict:
    if before is None or before is now:
        return now
    gradient = TensorFlowVerdict.GRADIENT
    return gradient if gradient in (before, now) else now


def verify_graph(traced: TracedGraph, loss: Any) -> TensorFlowGradients:
    """TensorFlow's verdicts on a TF1 graph's loss: tf.gradients, run in a session."""
    import numpy as np
    import tensorflow as tf

    graph = loss.graph
    variables = [v for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)]
    by_name = {v.op.name: v for v in variables}
    names = [r.variable.name for r in traced.variables if r.variable.name in by_name]
    try:
        with graph.as_default():
            gradients = tf.compat.v1.gradients(loss, [by_name[n] for n in names])
            present = [(n, g) for n, g in zip(names, gradients) if g is not None]
            verdicts = {n: TensorFlowVerdict.NONE for n, g in zip(names, gradients) if g is None}
            with tf.compat.v1.Session(graph=graph) as session:
                for run in range(_RUNS):
                    feeds = _random_feeds(graph, run)
                    session.run(tf.compat.v1.global_variables_initializer(), feed_dict=feeds)
                    values = session.run([g for _, g in present], feed_dict=feeds)
                    for (name, _), value in zip(present, values):
                        dense = value.values if hasattr(value, "values") else value
                        verdict = (
                            TensorFlowVerdict.GRADIENT if np.any(dense) else TensorFlowVerdict.ZERO
                        )
                        verdicts[name] = _combine(verdicts.get(name) if run else None, verdict)
    except Exception as error:
        return TensorFlowGradients(TAPE, error=f"{type(error).__name__}: {error}")
    return TensorFlowGradients(TF1_SESSION, verdicts)


def _random_feeds(graph: Any, seed: int) -> dict[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {
        op.outputs[0]: random_value(op.outputs[0].shape, op.outputs[0].dtype, rng)
        for op in graph.get_operations()
        if op.type == "Placeholder"
    }


def saved_model_gradients(path: Path, loss: str) -> TensorFlowGradients:
    """TensorFlow's verdicts on a SavedModel's loss, or the error TensorFlow raised."""
    try:
        return TensorFlowGradients(SAVED_MODEL_TAPE, _saved_model_verdicts(path, loss))
    except Exception as error:  # TensorFlow's own failure is a result of --verify
        return TensorFlowGradients(SAVED_MODEL_TAPE, error=f"{type(error).__name__}: {error}")


def _saved_model_verdicts(path: Path, loss: str) -> dict[str, TensorFlowVerdict]:
    """TensorFlow's verdicts on a SavedModel's loss: load it for real and take the tape's word."""
    import tensorflow as tf
    from tensorflow.python.checkpoint import graph_view
    from tensorflow.python.checkpoint import util as checkpoint_util

    loaded = tf.saved_model.load(str(path))
    if not hasattr(loaded, "signatures") or not _has_object_graph(path):
        raise GradcheckError("--verify supports TF2 SavedModels only")
    function_name, _, key = loss.partition(":")
    if function_name in loaded.signatures:
        concrete = function = loaded.signatures[function_name]
    else:
        function = loaded
        for part in function_name.split("."):
            function = getattr(function, part)
        # Call the restored function itself: a tape over its inner concrete function fails on
        # While loops ("a variable without handle data"); the inner one only gives the inputs.
        concrete = getattr(function, "concrete_functions", [function])[0]
    variables = []
    seen = set()
    for obj in checkpoint_util.list_objects(graph_view.ObjectGraphView(loaded)):
        if isinstance(obj, tf.Variable) and obj.name not in seen:
            seen.add(obj.name)
            variables.append(obj)

    def compute() -> Any:
        result = call_with_random_inputs(function, concrete)
        if isinstance(result, dict):
            return (
                result[key]
                if key
                else (result["loss"] if "loss" in result else next(iter(result.values())))
            )
        return tf.nest.flatten(result)[0]

    names = [v.name.split(":")[0] for v in variables]
    return tape_verdicts(compute, variables, names)


def _has_object_graph(path: Path) -> bool:
    from gradcheck_cli.protos.tf_protos import protos

    saved_model = protos().saved_model_pb2.SavedModel()
    saved_model.ParseFromString((path / "saved_model.pb").read_bytes())
    return bool(saved_model.meta_graphs[0].object_graph_def.nodes)
