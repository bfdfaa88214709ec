"""Trace a loss function into graph protos, in the worker or in process, with TF's own gradients."""

from __future__ import annotations

import inspect
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.graph.model import CreationNames, SourceLocation
from gradcheck_cli.tracing.keras_weights import KerasWeights
from gradcheck_cli.tracing.shape_reads import keeping_shape_reads
from gradcheck_cli.worker.protocol import TensorFlowGradients, TracedFunction


def concrete_function(value: Any, name: str, path: Path) -> Any:
    """`value` (a tf.function, a concrete function or a plain function) as a concrete function."""
    if type(value).__name__ == "ConcreteFunction":
        return value
    function = getattr(value, "python_function", value)
    if getattr(value, "input_signature", None) is None and not takes_no_arguments(function):
        raise GradcheckError(
            f"{name} in {display_path(path)} takes arguments but has no input_signature: "
            f"gradcheck cannot make up ({', '.join(required_parameters(function))}); give it "
            "@tf.function(input_signature=[tf.TensorSpec(...)])"
            f"{run_hint(path, ', or check the training script with')}"
        )
    with recording_variables() as created:
        try:
            return trace_function(value)
        except Exception:
            # tf.function traces again after a trace that created variables, and fails if the
            # second trace creates them again: a model built inside the loss. A model built
            # lazily at its first call creates its variables once, and traces fine.
            if created and _creates_variables_again(value):
                raise GradcheckError(
                    f"{name} in {display_path(path)} creates its variables inside the loss on "
                    "every call, so they are new at each training step; build the model outside "
                    "the loss"
                    f"{run_hint(path, ', or use')}"
                ) from None
            raise


def trace_function(value: Any) -> Any:
    """The concrete function of a tf.function or of a zero-argument plain function."""
    import tensorflow as tf

    with keeping_shape_reads():
        if hasattr(value, "get_concrete_function"):
            return value.get_concrete_function()
        # A plain function runs eagerly in the user's code: trace it without autograph, so that
        # float(), bool() and `if tensor:` fail here as they would cut the gradient there.
        return tf.function(value, autograph=False).get_concrete_function()


@contextmanager
def recording_variables() -> Iterator[list[Any]]:
    """The variables created inside the block (other recorders around it still see them)."""
    import tensorflow as tf

    created: list[Any] = []

    def record(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        created.append(variable)
        return variable

    with tf.variable_creator_scope(record):
        yield created


def _creates_variables_again(value: Any) -> bool:
    import tensorflow as tf

    again = tf.function(
        getattr(value, "python_function", value),
        input_signature=getattr(value, "input_signature", None),
        autograph=False,
    )
    with recording_variables() as created, suppress(Exception):
        again.get_concrete_function()
    return bool(created)


def run_hint(path: Path, lead: str) -> str:
    """`lead` and the command that checks the script `path` as it trains; "" for a notebook
    or a Keras file."""
    return f"{lead} `gradcheck run {display_path(path)}`" if path.suffix == ".py" else ""


RUN_INSTEAD = "check the script as it trains, stopped at its first gradient request, with"
"""How the errors of a plain check name `gradcheck run`, before the command (`run_hint`)."""


def takes_no_arguments(function: Any) -> bool:
    return not required_parameters(function)


def required_parameters(function: Any) -> list[str]:
    """The names of the parameters a call of `function` must pass (none when unknown)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in signature.parameters.values()
        if p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name != "self"
    ]


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
    left_out: Collection[int] = (),
    names: CreationNames | None = None,
) -> TracedFunction:
    """The traced loss of `concrete` over `candidates` (see `traced.traced_function`); the
    variables whose ids are `left_out` are never candidates, even when it reads them."""
    from gradcheck_cli.tracing import traced
    from gradcheck_cli.tracing.tf_verification import (
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
        left_out=left_out,
        names=names,
    )
    if verify:
        import tensorflow as tf

        def compute() -> Any:
            outputs = call_with_random_inputs(concrete, concrete)
            return tf.nest.flatten(outputs, expand_composites=True)[loss_output]

        verdicts = tape_verdicts(
            compute,
            traced.candidate_variables(candidates, concrete, left_out),
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
