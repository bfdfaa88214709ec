"""Ask TensorFlow, in this process, which variables a loss function gives no gradient to.

The in-process twin of `oracle.py` for models the test itself builds (generated programs, Keras
architectures): a `tf.GradientTape` that watches exactly the given variables, the loss called once
on the given inputs. Verdicts per variable (TF name without ":0"; Keras 3 weights by their path):
"none" (the gradient is None), "zero" (it evaluates to exactly all zeros), "gradient".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

DEAD = frozenset({"none", "zero"})
"""Verdicts that mean "training on this loss can never change the variable"."""


def variable_name(variable: Any) -> str:
    """The name gradcheck reports: the Keras path for Keras 3 weights, else the TF name."""
    path = getattr(variable, "path", None)
    if isinstance(path, str) and not _is_tf_variable(variable):
        return path
    name: str = variable.name
    base, _, index = name.rpartition(":")
    return base if base and index.isdigit() else name


def tf_verdicts(
    fn: Callable[..., Any], variables: Iterable[Any], args: Sequence[Any] = ()
) -> dict[str, str]:
    """TensorFlow's verdict on each of `variables` for the scalar loss `fn(*args)`."""
    import numpy as np
    import tensorflow as tf

    variables = list(variables)
    names = [variable_name(v) for v in variables]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"variable names must be unique, these repeat: {duplicates}")
    # Keras 3 variables wrap a tf.Variable; the tape only knows the wrapped one.
    watched = [v if _is_tf_variable(v) else v.value for v in variables]
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        for variable in watched:
            tape.watch(variable)
        loss = fn(*args)
    gradients = tape.gradient(loss, watched, unconnected_gradients=tf.UnconnectedGradients.NONE)
    verdicts = {}
    for name, gradient in zip(names, gradients):
        if gradient is None:
            verdicts[name] = "none"
        elif np.any(tf.convert_to_tensor(gradient).numpy() != 0):
            verdicts[name] = "gradient"
        else:
            verdicts[name] = "zero"
    return verdicts


def dead_names(verdicts: dict[str, str]) -> set[str]:
    """The variables TensorFlow says can never train."""
    return {name for name, answer in verdicts.items() if answer in DEAD}


def _is_tf_variable(variable: Any) -> bool:
    import tensorflow as tf

    return isinstance(variable, tf.Variable)
