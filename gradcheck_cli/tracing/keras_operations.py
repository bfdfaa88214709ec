"""Where the user wrote each op of a functional Keras model: `keras.ops.stop_gradient(x)` on a
symbolic tensor makes a Keras 3 `Operation` (`tf.stop_gradient(x)` a Keras 2 `TFOpLambda` layer)
that the model replays at every call, inside Keras's code, so TensorFlow's traceback of the op
it makes names the line that called the model (`model.fit`), not the user's line. What such a
replay makes is told by the line that built the Operation or the op layer."""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.debug_info import library_entry

# Per graph, the name of each op a replayed Operation made -> the line that built the Operation.
_REPLAYED: weakref.WeakKeyDictionary[Any, dict[str, SourceLocation]] = weakref.WeakKeyDictionary()
# The line of the Operation an eager call replays now, innermost last.
_EAGER: list[SourceLocation] = []


def watch_operations(
    keras: Any,
    site: Callable[[Any], SourceLocation | None],
    is_layer: Callable[[Any], bool],
    layer_site: Callable[[Any], SourceLocation | None],
) -> Callable[[], None]:
    """Record, for Keras 3's Operations that are not layers, the line that built each (`site`,
    asked with the operation while its constructor runs), and mark what each replay makes;
    Keras 2's op layers are told by their layer's line (`layer_site`). Returns what undoes it."""
    source = getattr(keras, "src", None)
    operation_class = getattr(
        getattr(getattr(source, "ops", None), "operation", None), "Operation", None
    )
    if operation_class is None:
        return _watch_op_layers(source, layer_site)
    sites: weakref.WeakKeyDictionary[Any, SourceLocation] = weakref.WeakKeyDictionary()
    original_init = operation_class.__init__
    original_call = operation_class.__call__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if not is_layer(self) and self not in sites:
            with contextlib.suppress(TypeError):  # an operation that cannot be weakly held
                where = site(self)
                if where is not None:
                    sites[self] = where

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = sites.get(self) if not is_layer(self) else None
        if where is None:
            return original_call(self, *args, **kwargs)
        with _replaying(where):
            return original_call(self, *args, **kwargs)

    operation_class.__init__ = init
    operation_class.__call__ = call

    def undo() -> None:
        operation_class.__init__ = original_init
        operation_class.__call__ = original_call

    return undo


def _watch_op_layers(
    source: Any, layer_site: Callable[[Any], SourceLocation | None]
) -> Callable[[], None]:
    """Keras 2: a TensorFlow function applied to a symbolic tensor is a `TFOpLambda` layer,
    whose `_call_wrapper` runs the function at each replay."""
    layers = getattr(getattr(source, "layers", None), "core", None)
    op_layer = getattr(getattr(layers, "tf_op_layer", None), "TFOpLambda", None)
    original = getattr(op_layer, "_call_wrapper", None)
    if original is None:
        return lambda: None

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = layer_site(self)
        if where is None:
            return original(self, *args, **kwargs)
        with _replaying(where):
            return original(self, *args, **kwargs)

    op_layer._call_wrapper = call
    return lambda: setattr(op_layer, "_call_wrapper", original)


@contextlib.contextmanager
def _replaying(where: SourceLocation) -> Iterator[None]:
    """Mark the ops made inside (graph mode), or tell the eager recorder (eager mode)."""
    import tensorflow as tf

    if tf.executing_eagerly():
        _EAGER.append(where)
        try:
            yield
        finally:
            _EAGER.pop()
        return
    graph = tf.compat.v1.get_default_graph()
    seen = {op.name for op in graph.get_operations()}
    try:
        yield
    finally:
        marked = _REPLAYED.setdefault(graph, {})
        for op in graph.get_operations():
            if op.name not in seen and op.name not in marked:
                marked[op.name] = _made_within(where, op.traceback)


def replayed_at(graph: Any, op_name: str) -> SourceLocation | None:
    """The line that built the Keras Operation whose replay made `op_name` in `graph`."""
    try:
        return _REPLAYED.get(graph, {}).get(op_name)
    except TypeError:  # a graph-like object that cannot be weakly referenced
        return None


def replaying_now(frames: Iterable[Any]) -> SourceLocation | None:
    """The line of the Keras Operation an eager call is replaying now, if any, for an op made
    through `frames` (its stack, outermost first)."""
    return _made_within(_EAGER[-1], frames) if _EAGER else None


_KERAS = {"keras", "tf_keras"}


def outside_keras(path: str) -> bool:
    """Whether a frame's file is outside Keras's own code (Keras 3's or Keras 2's)."""
    return not _KERAS & set(path.split(os.sep))


def _made_within(where: SourceLocation, frames: Iterable[Any]) -> SourceLocation:
    """`where`, with the library whose function made the op, as the frames past the replay
    tell it outside Keras's own (or as the frames that built the op layer told it): None for
    the op's own API (`keras.ops.stop_gradient` reaches `tf.stop_gradient`), "TensorFlow's
    moments" for a stop_gradient that `tf.nn.moments` makes."""
    after: list[tuple[str, str]] = []
    for frame in frames or ():
        filename = getattr(frame, "filename", "") or ""
        if filename == __file__ or not outside_keras(filename):
            after = []  # the function starts below the replay's wrapper and Keras's frames
        else:
            after.append((filename, getattr(frame, "name", "") or ""))
    return replace(where, inside=where.inside or library_entry(after))
