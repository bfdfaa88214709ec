"""Find the loss in a script's namespace: a named attribute, a TF1 tensor, the only candidate."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from gradcheck_cli.loaders.function_tracing import takes_no_arguments
from gradcheck_cli.loaders.loss_names import looks_like_loss, resolve_loss_name

SCRIPT_RUN_NAME = "__gradcheck__"
"""The `__name__` a script runs under: not "__main__", and the mark of the script's functions."""


def find_loss(namespace: dict[str, Any], loss: str | None, path: Path) -> tuple[str, Any]:
    """(name, value) of the loss in a script's namespace; GradcheckError lists the candidates."""
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
            resolve_loss_name(loss, {**suggestions, **candidates}, what=str(path))
    name = resolve_loss_name(loss, candidates, what=str(path))
    return name, candidates[name]


def is_graph_tensor(value: Any) -> bool:
    """A tensor of a TF1 graph (symbolic), as opposed to an eager value."""
    import tensorflow as tf

    return isinstance(value, tf.Tensor) and tf.is_symbolic_tensor(value)


def _looks_callable_loss(value: Any) -> bool:
    if hasattr(value, "get_concrete_function") or type(value).__name__ == "ConcreteFunction":
        return True
    return (
        inspect.isfunction(value)
        and value.__module__ == SCRIPT_RUN_NAME
        and takes_no_arguments(value)
    )


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
