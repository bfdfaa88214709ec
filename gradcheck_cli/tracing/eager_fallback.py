"""Ask TensorFlow's tape, run eagerly, which variables get gradient from a loss that leaves TF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.graph.model import CreationNames, SourceLocation, TensorFlowVerdict
from gradcheck_cli.tracing.function_tracing import required_parameters
from gradcheck_cli.tracing.leaving_tensorflow import Leave
from gradcheck_cli.worker.protocol import EagerResult, TensorFlowGradients


def eager_fallback(
    function: Any,
    name: str,
    path: Path,
    candidates: list[Any],
    keras_info: dict[int, tuple[str, bool]],
    created_at: dict[int, SourceLocation | None],
    trace_error: Exception,
    verify: bool,
    names: CreationNames | None = None,
) -> EagerResult:
    """The loss cannot be traced: run it eagerly and ask TensorFlow's tape which variables get
    no gradient, and where the script's code took the value out of TensorFlow.

    Whatever made tracing fail (`.numpy()` on a tensor or a variable, `float()`, NumPy, a
    tensor as a Python truth value), the eager run decides: a loss that fails there too has a
    bug of its own, reported as one GradcheckError.
    """
    import tensorflow as tf

    from gradcheck_cli.tracing import traced
    from gradcheck_cli.tracing.leaving_tensorflow import recording_leaves
    from gradcheck_cli.tracing.tf_verification import TAPE, gradient_verdicts

    eager_function = getattr(function, "python_function", function)
    if required_parameters(eager_function):  # traced from an input_signature: no eager call
        raise _cannot_be_traced(name, path, trace_error)
    variables = list(candidates)
    try:
        with recording_leaves() as leaves, tf.GradientTape(watch_accessed_variables=False) as tape:
            for variable in variables:
                tape.watch(variable)
            with tf.GradientTape() as reads:
                result = eager_function()
    except Exception as error:
        raise _fails_eagerly(name, path, trace_error, error) from None
    read_ids = {id(v) for v in reads.watched_variables()}
    # Eager variables often share TensorFlow's name ("Variable"): verdicts are keyed by names
    # told apart.
    models, names = [], names or CreationNames.as_asked()
    for variable in variables:
        key_path, keras_trainable = keras_info.get(id(variable), (None, variable.trainable))
        models.append(
            traced.model_variable(
                variable,
                names.name(variable, key_path or traced.variable_name(variable)),
                keras_trainable,
                location=created_at.get(id(variable)),
            )
        )
    gradients: dict[str, TensorFlowVerdict] = {}
    verdicts = gradient_verdicts(tape, result, variables)
    for variable, model, gradient in zip(variables, models, verdicts):
        if model.trainable:
            read = id(variable) in read_ids
            gradients[model.name] = gradient if read else TensorFlowVerdict.UNREAD
    left_at, reason = _where_it_left(leaves.leaves, trace_error)
    return EagerResult(
        loss_name=name,
        variables=models,
        gradients=gradients,
        left_at=left_at,
        reason=reason,
        tensorflow=TensorFlowGradients(TAPE, dict(gradients)) if verify else None,
    )


def _where_it_left(
    leaves: list[Leave], trace_error: Exception
) -> tuple[SourceLocation | None, str]:
    """The line where the value first left TensorFlow, and how.

    Tracing stops at the first way out, so its line comes first; the eager run names the way
    (NumPy reads an eager tensor through the buffer protocol, which no hook sees: then the
    trace error's first sentence says it).
    """
    from gradcheck_cli.tracing import traced

    at = traced.exception_location(trace_error)
    words = traced.error_summary(trace_error).split(". ")[0].rstrip(".")
    if at is None:
        return (leaves[0].location, leaves[0].reason) if leaves else (None, words)
    for leave in leaves:
        if (leave.location.file, leave.location.line) == (at.file, at.line):
            return at, leave.reason
    return at, words


def _fails_eagerly(name: str, path: Path, trace_error: Exception, error: Exception) -> Exception:
    """One error for a loss that fails traced and eagerly: the trace's words when both fail
    on the same line (the graph's shape errors name the shapes), else both."""
    from gradcheck_cli.tracing import traced

    where = traced.exception_location(error)
    at = f" at {where}" if where else ""
    if where is not None and where == traced.exception_location(trace_error):
        return _cannot_be_traced(name, path, trace_error)
    return GradcheckError(
        f"{name} in {display_path(path)} cannot be traced ({type(trace_error).__name__}: "
        f"{traced.error_summary(trace_error)}) and fails when run eagerly{at}: "
        f"{type(error).__name__}: {traced.error_summary(error)}"
    )


def _cannot_be_traced(name: str, path: Path, trace_error: Exception) -> GradcheckError:
    from gradcheck_cli.tracing import traced

    where = traced.exception_location(trace_error)
    at = f" at {where}" if where else ""
    return GradcheckError(
        f"{name} in {display_path(path)} cannot be traced{at}: {traced.error_summary(trace_error)}"
    )
