"""Where a script's gradient_override_map missed: ops made under a map that keys other op types.

TensorFlow looks an op's gradient up by its type; a map keyed by another type (`"Floor"` over a
`tf.round`, `"round"`) changes nothing, and no trace of the map is left in the graph. While the
script runs, each map's ops are recorded, and the ops it does not key are marked in the protos
for the advice (the map the user wrote, where, and the key it needs).
"""

from __future__ import annotations

import contextlib
import json
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from gradcheck_cli.protos.missed_overrides import MISSED_OVERRIDE_ATTR

# Per graph: (first op id after the map was entered, last op id made under it, map, where).
_MAPS: weakref.WeakKeyDictionary[Any, list[tuple[int, int, dict[str, str], Any]]] = (
    weakref.WeakKeyDictionary()
)


@contextlib.contextmanager
def recording_override_maps() -> Iterator[None]:
    """Record every `Graph.gradient_override_map` the script enters, with its ops."""
    from tensorflow.python.framework import ops
    from tensorflow.python.util import tf_stack

    from gradcheck_cli.tracing.traced import user_location

    original = ops.Graph.gradient_override_map

    @contextlib.contextmanager
    def recorded(graph: Any, op_type_map: Any) -> Iterator[None]:
        start = _last_id(graph)
        where = user_location(tf_stack.extract_stack())
        with original(graph, op_type_map):
            yield
        with contextlib.suppress(TypeError):
            mapping = {str(k): str(v) for k, v in dict(op_type_map).items()}
            _MAPS.setdefault(graph, []).append((start, _last_id(graph), mapping, where))

    ops.Graph.gradient_override_map = recorded
    try:
        yield
    finally:
        ops.Graph.gradient_override_map = original


def _last_id(graph: Any) -> int:
    return max((op._id for op in graph.get_operations()), default=0)  # noqa: SLF001


def mark_missed_overrides(graph: Any, node_defs: Iterable[Any]) -> None:
    """Give each node of `graph` made under an override map that does not key its type the
    attribute MISSED_OVERRIDE_ATTR."""
    maps = _MAPS.get(graph)
    if not maps:
        return
    missed: dict[str, str] = {}
    for op in graph.get_operations():
        for start, end, mapping, where in maps:
            if start < op._id <= end and op.type not in mapping:  # noqa: SLF001
                missed[op.name] = json.dumps(
                    {
                        "map": mapping,
                        "file": where.file if where is not None else None,
                        "line": where.line if where is not None else None,
                    },
                    sort_keys=True,
                )
    for node in node_defs:
        text = missed.get(node.name)
        if text is not None:
            node.attr[MISSED_OVERRIDE_ATTR].s = text.encode()
