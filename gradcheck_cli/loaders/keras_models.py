"""Trace a Keras model's own objective: a script's model, a live model, a .keras / .h5 file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.loaders.function_tracing import trace_loss
from gradcheck_cli.loaders.keras_weights import KerasWeights
from gradcheck_cli.loaders.worker_protocol import TracedFunction


def is_keras_model(value: Any) -> bool:
    """Whether `value` is a keras.Model; never imports Keras to find out."""
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(value, keras.Model)


def trace_keras_model(
    model: Any,
    loss: str | None,
    name: str,
    candidates: list[Any],
    keras: KerasWeights,
    created_at: dict[int, SourceLocation | None],
    verify: bool,
) -> TracedFunction:
    """The model's own objective; with model.losses, also the data loss alone (for GC206)."""
    from gradcheck_cli.loaders.keras_objective import keras_objective

    # The optimizer's slots and the metrics' counters are Keras's bookkeeping, not the model's.
    bookkeeping = {id(getattr(v, "value", v)) for v in _bookkeeping_variables(model)}
    candidates = [v for v in candidates if id(v) not in bookkeeping]
    weights = [w.value for w in model.weights]
    for weight in model.weights:
        keras.info.setdefault(id(weight.value), (weight.path, bool(weight.trainable)))
    known = {id(v) for v in candidates}
    candidates = candidates + [v for v in weights if id(v) not in known]
    objective = keras_objective(model, loss, name)

    result = trace_loss(
        objective.full, name, candidates, verify=verify, created_at=created_at, keras=keras
    )
    if objective.data_only is not None:
        result.data_only = trace_loss(
            objective.data_only, name, candidates, verify=False, created_at=created_at, keras=keras
        )
    return result


def _bookkeeping_variables(model: Any) -> list[Any]:
    variables = list(getattr(model, "metrics_variables", []) or [])
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        variables += list(getattr(optimizer, "variables", []) or [])
    return variables


def load_keras_file(path: Path, loss: str | None, verify: bool, unsafe: bool) -> TracedFunction:
    """A `.keras` / `.h5` model, deserialized with Keras's safe mode unless told otherwise."""
    import keras

    try:
        model = keras.saving.load_model(str(path), safe_mode=not unsafe, compile=True)
    except Exception as error:
        from gradcheck_cli.loaders import traced

        hint = (
            "; it holds Python code (a Lambda layer?): if you trust it, pass "
            "--unsafe-deserialization"
            if "safe_mode" in str(error) or "unsafe" in str(error).lower()
            else ""
        )
        raise GradcheckError(
            f"{path} cannot be loaded by Keras: {traced.error_summary(error)}{hint}"
        ) from None
    return trace_live_keras_model(model, loss, path.name, verify)


def trace_live_keras_model(model: Any, loss: str | None, name: str, verify: bool) -> TracedFunction:
    """A live Keras model's own objective (a loaded file's, or one handed to the library)."""
    result = trace_keras_model(model, loss, name, [], KerasWeights(), {}, verify)
    result.loss_name = loss or "compiled loss + model.losses"
    return result
