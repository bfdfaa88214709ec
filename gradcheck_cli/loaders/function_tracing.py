"""Trace a loss function into graph protos, in the worker or in process, with TF's own gradients."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.loaders.keras_weights import KerasWeights
from gradcheck_cli.loaders.worker_protocol import TensorFlowGradients, TracedFunction


def concrete_function(value: Any, name: str, path: Path) -> Any:
    """`value` (a tf.function, a concrete function or a plain function) as a concrete function."""
    import tensorflow as tf

    if type(value).__name__ == "ConcreteFunction":
        return value
    if hasattr(value, "get_concrete_function"):
        if getattr(value, "input_signature", None) is None:
            function = getattr(value, "python_function", None)
            if function is not None and not takes_no_arguments(function):
                raise GradcheckError(
                    f"{name} in {path} takes arguments but has no input_signature; give it "
                    "@tf.function(input_signature=[tf.TensorSpec(...)]) so gradcheck can trace it"
                )
        return value.get_concrete_function()
    # A plain function runs eagerly in the user's code: trace it without autograph, so that
    # float(), bool() and `if tensor:` fail here as they would cut the gradient there.
    return tf.function(value, autograph=False).get_concrete_function()


def takes_no_arguments(function: Any) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
        if p.name != "self"
    )


def loss_output_index(concrete: Any, name: str) -> int:
    """Which flat output of `concrete` is the loss: its only output, or the 'loss' key."""
    import tensorflow as tf

    structure = concrete.structured_outputs
    flat = tf.nest.flatten(structure)
    if isinstance(structure, dict) and "loss" in structure:
        chosen = structure["loss"]
    elif len(flat) == 1:
        chosen = flat[0]
    else:
        raise GradcheckError(
            f"{name} returns {len(flat)} tensors; return the loss alone, or a dict with a "
            "'loss' key"
        )
    outputs = [id(t) for t in concrete.graph.outputs]
    if id(chosen) not in outputs:
        raise GradcheckError(f"{name} does not return a tensor gradcheck can follow")
    return outputs.index(id(chosen))


def trace_loss(
    concrete: Any,
    name: str,
    candidates: Sequence[Any],
    *,
    verify: bool,
    created_at: dict[int, SourceLocation | None] | None = None,
    keras: KerasWeights | None = None,
) -> TracedFunction:
    """The traced loss of `concrete` over `candidates` (see `traced.traced_function`)."""
    from gradcheck_cli.loaders import traced
    from gradcheck_cli.loaders.tf_verification import (
        TAPE,
        call_with_random_inputs,
        tape_verdicts,
    )

    loss_output = loss_output_index(concrete, name)
    result = traced.traced_function(
        concrete,
        name,
        loss_output,
        candidates,
        created_at=created_at,
        keras_info=keras.info if keras else None,
        attributes=keras.attributes if keras else None,
    )
    if verify:
        import tensorflow as tf

        def compute() -> Any:
            outputs = call_with_random_inputs(concrete, concrete)
            return tf.nest.flatten(outputs, expand_composites=True)[loss_output]

        verdicts = tape_verdicts(
            compute,
            traced.candidate_variables(candidates, concrete),
            [r.variable.name for r in result.variables],
        )
        result.tensorflow = TensorFlowGradients(TAPE, verdicts)
    return result


def trace_live_function(function: Any, variables: Any, *, verify: bool) -> TracedFunction:
    """A live tf.function or zero-argument loss function, traced in this process.

    `variables`: extra candidates; Keras variables are named by their Keras path.
    """
    name = function_name(function)
    concrete = concrete_function(function, name, Path("<function>"))
    candidates = list(variables or ())
    keras = KerasWeights()
    for variable in candidates:
        backing = getattr(variable, "value", None)
        if backing is not None and hasattr(variable, "path"):
            keras.info[id(backing)] = (variable.path, bool(variable.trainable))
    candidates = [getattr(v, "value", v) if hasattr(v, "path") else v for v in candidates]
    return trace_loss(concrete, name, candidates, verify=verify, keras=keras)


def function_name(function: Any) -> str:
    return str(getattr(function, "__name__", None) or getattr(function, "name", "loss"))
