"""Ask TensorFlow's tape, run eagerly, which variables get gradient from a loss that leaves TF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import SourceLocation, TensorFlowVerdict
from gradcheck_cli.loaders.worker_protocol import EagerResult, TensorFlowGradients


def left_tensorflow(error: Exception) -> bool:
    """Whether tracing failed because the loss turns a tensor into a Python or NumPy value.

    TensorFlow names the graph tensor "symbolic" in each of these errors: `.numpy()`
    (AttributeError), NumPy on a tensor (NotImplementedError), `float()` (TypeError), `bool()`
    (OperatorNotAllowedInGraphError).
    """
    return "symbolic" in str(error).lower()


def eager_fallback(
    function: Any,
    name: str,
    path: Path,
    candidates: list[Any],
    keras_info: dict[int, tuple[str, bool]],
    created_at: dict[int, SourceLocation | None],
    trace_error: Exception,
    verify: bool,
) -> EagerResult:
    """The loss cannot be traced: ask TensorFlow's tape which variables get no gradient."""
    import tensorflow as tf

    from gradcheck_cli.loaders import traced
    from gradcheck_cli.loaders.tf_verification import TAPE, gradient_verdicts

    eager_function = getattr(function, "python_function", function)
    variables = list(candidates)
    try:
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            for variable in variables:
                tape.watch(variable)
            with tf.GradientTape() as reads:
                result = eager_function()
    except Exception as error:
        where = traced.exception_location(error)
        at = f" at {where}" if where else ""
        raise GradcheckError(
            f"{name} in {path} cannot be traced ({type(trace_error).__name__}: {trace_error}) "
            f"and fails when run eagerly{at}: {type(error).__name__}: {error}"
        ) from None
    read_ids = {id(v) for v in reads.watched_variables()}
    gradients: dict[str, TensorFlowVerdict] = {}
    models = []
    for variable, gradient in zip(variables, gradient_verdicts(tape, result, variables)):
        key_path, keras_trainable = keras_info.get(id(variable), (None, variable.trainable))
        model = traced.model_variable(
            variable,
            key_path or traced.variable_name(variable),
            keras_trainable,
            location=created_at.get(id(variable)),
        )
        models.append(model)
        if keras_trainable:
            read = id(variable) in read_ids
            gradients[model.name] = gradient if read else TensorFlowVerdict.UNREAD
    return EagerResult(
        loss_name=name,
        variables=models,
        gradients=gradients,
        left_at=traced.exception_location(trace_error),
        reason=traced.error_summary(trace_error),
        tensorflow=TensorFlowGradients(TAPE, dict(gradients)) if verify else None,
    )
