"""Read the flat variable lists of Keras export archives: trainability and repeated copies."""

from __future__ import annotations

from typing import Any

from gradcheck_cli.protos.limits import shape_dims

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
