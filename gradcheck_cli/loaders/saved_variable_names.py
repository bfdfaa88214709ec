"""Name a SavedModel's variables as the code that built them does, and tell which are listed."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

from gradcheck_cli.graph.model import Variable
from gradcheck_cli.loaders.proto_limits import shape_dims

# Every Keras 3 layer tracks these lists; the object graph keeps no class names for layers.
_KERAS_LAYER_CHILDREN = frozenset({"_inbound_nodes", "_outbound_nodes"})


def name_saved_variables(
    variables: list[Variable], object_graph: Any, node_of: dict[int, int]
) -> None:
    """Rename the variables whose saved names collide, from their attribute paths.

    A functional Keras model saves each variable under its Keras path ("mha/key/kernel"),
    unique and kept. A subclassed one builds its layers inside the model's call, where
    TensorFlow's scope holds only the model's name: "moe_model/kernel" for every kernel. Those
    are named by where they hang in the object graph, scoped like Keras ("moe_model/" + the
    attribute path from the outermost Keras layer + the variable's own name). `node_of` maps
    the index of each variable whose `path` follows attributes (not a flat variable list) to
    its object graph node.
    """
    counts = Counter(variable.name for variable in variables)
    colliding = [i for i, v in enumerate(variables) if counts[v.name] > 1 and i in node_of]
    if not colliding:
        return
    outermost = _outermost_keras_layers(object_graph)
    for index in colliding:
        variable = variables[index]
        assert variable.path is not None
        segments = variable.path.split(".")
        scope, _, leaf = variable.name.rpartition("/")
        start = outermost.get(node_of[index])
        parts = segments[:-1] if start is None else segments[start:-1]
        prefix = [scope] if start is not None and scope else []
        variable.name = "/".join([*prefix, *parts, leaf or segments[-1].lstrip("_")])


def _outermost_keras_layers(object_graph: Any) -> dict[int, int]:
    """Node id -> how many attributes lead from the root to the outermost Keras layer above it
    (or at it), along the breadth-first paths that name the nodes."""
    depth = {0: 0}
    outermost: dict[int, int] = {}
    queue = deque([0])
    while queue:
        node_id = queue.popleft()
        node = object_graph.nodes[node_id]
        if node_id not in outermost and _KERAS_LAYER_CHILDREN <= {
            child.local_name for child in node.children
        }:
            outermost[node_id] = depth[node_id]
        for child in node.children:
            if child.node_id not in depth:
                depth[child.node_id] = depth[node_id] + 1
                if node_id in outermost:
                    outermost[child.node_id] = outermost[node_id]
                queue.append(child.node_id)
    return outermost


_VARIABLE_LISTS = (
    "variables.",
    "_all_variables.",
    "trainable_variables.",
    "non_trainable_variables.",
)


def listed_trainable(object_graph: Any) -> set[tuple[str, int, str]] | None:
    """Keys of the variables in the root's `trainable_variables` list (Keras export archives).

    Keras keeps a frozen layer's backing tf.Variable trainable, so `SavedVariable.trainable`
    is wrong for it; the archive's own list is right.
    """
    root = object_graph.nodes[0]
    listing = next(
        (c.node_id for c in root.children if c.local_name == "trainable_variables"), None
    )
    if listing is None:
        return None
    keys = set()
    for child in object_graph.nodes[listing].children:
        node = object_graph.nodes[child.node_id]
        if node.WhichOneof("kind") == "variable":
            variable = node.variable
            keys.add((variable.name, variable.dtype, str(shape_dims(variable.shape))))
    return keys


class ListedCopies:
    """Pairs the copies of a variable that Keras export archives list under several lists.

    An archive lists each variable twice (under `variables` and `_all_variables`), as two
    nodes; the function binds only one of them. Variables are told apart by (saved name,
    dtype, shape), which a subclassed model's variables share ("moe_model/kernel" twice with
    one shape): the n-th copy of such a key in one list pairs with the n-th one kept from the
    other lists, so no variable is merged into a different one.
    """

    def __init__(self) -> None:
        self._kept: dict[tuple[str, int, str], list[tuple[str, int]]] = {}
        self._cursor: dict[tuple[tuple[str, int, str], str], int] = {}

    def twin(self, key: tuple[str, int, str], listing: str) -> int | None:
        """The index of the variable, kept from another list, that this copy repeats."""
        kept = self._kept.get(key, [])
        position = self._cursor.get((key, listing), 0)
        while position < len(kept) and kept[position][0] == listing:
            position += 1
        self._cursor[(key, listing)] = position + 1 if position < len(kept) else position
        return kept[position][1] if position < len(kept) else None

    def keep(self, key: tuple[str, int, str], listing: str, index: int) -> None:
        self._kept.setdefault(key, []).append((listing, index))


def in_variable_list(path: str | None) -> bool:
    return path is not None and path.startswith(_VARIABLE_LISTS)
