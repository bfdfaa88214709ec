"""Find the loss in a script's namespace: a named attribute, a TF1 tensor, a loss found safely."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.loss.names import looks_like_loss, looks_like_setup, resolve_loss_name
from gradcheck_cli.tracing.function_tracing import (
    recording_variables,
    required_parameters,
    takes_no_arguments,
    trace_function,
)

SCRIPT_RUN_NAME = "__gradcheck__"
"""The `__name__` a script runs under: not "__main__", and the mark of the script's functions."""


def find_loss(namespace: dict[str, Any], loss: str | None, path: Path) -> tuple[str, Any]:
    """(name, value) of the loss in a script's namespace; GradcheckError lists the candidates.

    Without `loss`, a candidate named like a loss wins. Otherwise the one candidate left, once
    setup code (`looks_like_setup`) and functions that take arguments are set aside, is traced
    alone; it is the loss, as its concrete function, if that trace creates no variable and
    returns a float scalar.
    """
    candidates = {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_") and (is_graph_tensor(value) or _looks_callable_loss(value))
    }
    candidates.update(_module_methods(namespace))
    if loss is not None:
        value = _attribute_path(namespace, loss)
        if value is not None:
            return loss, value
        graph = next((v.graph for v in candidates.values() if is_graph_tensor(v)), None)
        if graph is None:
            import tensorflow as tf

            default = tf.compat.v1.get_default_graph()
            graph = default if default.get_operations() else None
        if graph is not None:
            tensor = _graph_tensor(graph, loss)
            if tensor is not None:
                return loss, tensor
            suggestions = dict.fromkeys(op.name for op in graph.get_operations())
            resolve_loss_name(loss, {**suggestions, **candidates}, what=display_path(path))
        name = resolve_loss_name(loss, candidates, what=display_path(path))
        return name, candidates[name]
    return _loss_without_name(namespace, candidates, path)


def _loss_without_name(
    namespace: dict[str, Any], candidates: dict[str, Any], path: Path
) -> tuple[str, Any]:
    loss_like = {name: value for name, value in candidates.items() if looks_like_loss(name)}
    if loss_like:
        name = resolve_loss_name(None, loss_like, what=display_path(path))
        return name, loss_like[name]
    skipped = _set_aside(namespace, candidates)
    others = {name: value for name, value in candidates.items() if name not in skipped}
    if len(others) > 1:
        resolve_loss_name(None, others, what=display_path(path))  # raises: choose one of them
    if others:
        name, value = next(iter(others.items()))
        if is_graph_tensor(value):
            return name, value
        concrete, why_not = _traced_alone(value)
        if concrete is not None:
            return name, concrete
        skipped[name] = why_not
    listing = "; ".join(f"{name}: {why}" for name, why in sorted(skipped.items())[:8])
    more = f"; and {len(skipped) - 8} more" if len(skipped) > 8 else ""
    raise GradcheckError(
        f"{display_path(path)} has no function or tensor that could be a loss"
        f"{f' (skipped {listing}{more})' if skipped else ''}; name the loss with --loss, or "
        "check the training script at its first training step with "
        f"`gradcheck run {display_path(path)}`"
    )


def _set_aside(namespace: dict[str, Any], candidates: dict[str, Any]) -> dict[str, str]:
    """Why each function that is no loss by its name or its parameters is set aside, untraced."""
    reasons: dict[str, str] = {}
    for name, value in namespace.items():
        if name.startswith("_") or is_graph_tensor(value):
            continue
        if not (_script_function(value) or name in candidates):
            continue
        parameters = required_parameters(getattr(value, "python_function", value))
        if looks_like_setup(name):
            reasons[name] = "named like training or setup code"
        elif parameters and not _has_signature(value):
            reasons[name] = f"takes arguments ({', '.join(parameters)})"
    return reasons


def _traced_alone(value: Any) -> tuple[Any, str]:
    """(its concrete function, "") if `value` traced alone returns a float scalar; else why not."""
    import tensorflow as tf

    failure = ""
    concrete = None
    with recording_variables() as created:
        try:
            concrete = trace_function(value)
        except (Exception, SystemExit) as error:
            failure = type(error).__name__
    if created:
        return None, "its trace creates variables"
    if concrete is None:
        return None, f"cannot be traced alone ({failure})"
    outputs = tf.nest.flatten(concrete.structured_outputs)
    if len(outputs) == 1 and _is_float_scalar(outputs[0]):
        return concrete, ""
    return None, "does not return a float scalar"


def _is_float_scalar(value: Any) -> bool:
    import tensorflow as tf

    return isinstance(value, tf.Tensor) and value.dtype.is_floating and value.shape.rank == 0


def _has_signature(value: Any) -> bool:
    return type(value).__name__ == "ConcreteFunction" or (
        getattr(value, "input_signature", None) is not None
    )


def _script_function(value: Any) -> bool:
    return inspect.isfunction(value) and value.__module__ == SCRIPT_RUN_NAME


def is_graph_tensor(value: Any) -> bool:
    """A tensor of a TF1 graph (symbolic), as opposed to an eager value."""
    import tensorflow as tf

    return isinstance(value, tf.Tensor) and tf.is_symbolic_tensor(value)


def _looks_callable_loss(value: Any) -> bool:
    if hasattr(value, "get_concrete_function") or type(value).__name__ == "ConcreteFunction":
        return True
    return _script_function(value) and takes_no_arguments(value)


def _module_methods(namespace: dict[str, Any]) -> dict[str, Any]:
    """`model.loss` for every loss-like tf.function method of a module-level tf.Module."""
    import tensorflow as tf

    methods: dict[str, Any] = {}
    for name, value in namespace.items():
        if name.startswith("_") or not isinstance(value, tf.Module):
            continue
        for klass in type(value).__mro__:
            for attribute, member in vars(klass).items():
                if hasattr(member, "get_concrete_function") and looks_like_loss(attribute):
                    methods.setdefault(f"{name}.{attribute}", getattr(value, attribute))
    return methods


def _attribute_path(namespace: dict[str, Any], dotted: str) -> Any:
    head, *rest = dotted.split(".")
    if head not in namespace:
        return None
    value = namespace[head]
    for part in rest:
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _graph_tensor(graph: Any, name: str) -> Any:
    try:
        return graph.get_tensor_by_name(name if ":" in name else f"{name}:0")
    except (KeyError, ValueError):
        return None
