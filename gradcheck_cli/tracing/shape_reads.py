"""While tracing, make `zeros_like`/`ones_like` of a variable read it, so the use shows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# TensorFlow folds `zeros_like(v)` and `ones_like(v)` of a variable with a static shape into a
# constant without even reading v: the traced graph has no trace of the use, and gradcheck would
# call v unused. Reading v first, inside the op's own name scope, leaves the read next to the
# constant, where the analysis finds it (like the read `tf.shape(v)` leaves on its own).
# `array_like_impl` is what both `tf.zeros_like` and `tf.ones_like` call, inside their scope.
_LIKE_IMPLEMENTATION = "array_like_impl"


@contextmanager
def keeping_shape_reads() -> Iterator[None]:
    """Inside the block, a traced `zeros_like`/`ones_like` of a variable reads the variable."""
    from tensorflow.python.ops import array_ops

    original = getattr(array_ops, _LIKE_IMPLEMENTATION, None)
    if not callable(original):
        yield  # another TensorFlow: uses stay unseen, as without this block
        return
    setattr(array_ops, _LIKE_IMPLEMENTATION, _reading(original))
    try:
        yield
    finally:
        setattr(array_ops, _LIKE_IMPLEMENTATION, original)


def _reading(original: Any) -> Any:
    def like(
        array_fn: Any,
        array_like_fn: Any,
        tensor: Any,
        dtype: Any,
        name: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        from tensorflow.python.eager import context
        from tensorflow.python.framework import ops

        if (
            isinstance(name, str)
            and name.endswith("/")
            and not context.executing_eagerly()
            and _is_variable(tensor)
        ):
            # `name` is the op's own scope ("zeros_like/"): entering it again puts the read in.
            with ops.name_scope(name):
                tensor = ops.convert_to_tensor(tensor)
        return original(array_fn, array_like_fn, tensor, dtype, name, *args, **kwargs)

    return like


def _is_variable(value: Any) -> bool:
    import tensorflow as tf

    if isinstance(value, tf.Variable):
        return True
    # A Keras 3 variable wraps a tf.Variable.
    return isinstance(getattr(value, "value", None), tf.Variable)
