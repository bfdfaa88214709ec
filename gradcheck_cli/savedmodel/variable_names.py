"""Name a SavedModel's variables as the code that built them does (Keras's `variable.path`)."""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gradcheck_cli.graph.model import Variable
from gradcheck_cli.protos.tf_protos import node_defs

# Every Keras 3 layer tracks these lists; the object graph keeps no class names for layers.
_KERAS_LAYER_CHILDREN = frozenset({"_inbound_nodes", "_outbound_nodes"})
_UNIQUE_SUFFIX = re.compile(r"_\d+$")


@dataclass(frozen=True)
class _Owners:
    """Where a variable hangs under Keras layers in the object graph."""

    outermost: int  # attributes from the root to the outermost Keras layer above the variable
    layers: int  # Keras layers from that one down to the variable's owner, both included
    layer: int  # the node of the owner, the nearest Keras layer above


def name_saved_variables(
    variables: list[Variable],
    meta_graph: Any,
    node_of: dict[int, int],
    children: list[list[tuple[int, str]]],
    functions: Mapping[str, Any],
) -> None:
    """Give Keras layers' variables their Keras paths, and colliding names attribute paths.

    A functional Keras model saves each variable under its Keras path ("mha/key/kernel"). A
    subclassed one builds its layers inside the model's call, where TensorFlow's scope holds
    only the model's name: "moe_model/kernel" for every kernel. The layers' names survive in
    the scopes of the ops that read the variable ("moe_model_1/b0_1/dense_1_1/Cast/..."),
    one scope per Keras layer on the variable's attribute path. Where they do not, colliding
    names become attribute paths scoped like Keras ("moe_model/blocks/0/dense/kernel").
    `node_of` maps the index of each variable whose `path` follows attributes (not a flat
    variable list) to its object graph node; `children`, each object node's (child node,
    attribute name); `functions`, the saved functions by name.
    """
    if not node_of:
        return
    owners, layer_above = _keras_owners(children)
    wanted = {node_of[i] for i in node_of if node_of[i] in owners}
    readers = _readers(meta_graph, functions, wanted)
    counts = Counter(variable.name for variable in variables)
    prefixes: dict[int, str] = {}  # owner layer node -> its Keras path, from a read variable
    unread: list[int] = []
    for index, node_id in node_of.items():
        variable = variables[index]
        owner = owners.get(node_id)
        scope, _, leaf = variable.name.rpartition("/")
        from_ops = _scoped_name(scope, leaf, readers.get(node_id), owner)
        if from_ops is not None and owner is not None:
            variable.name = from_ops
            parts = from_ops.split("/")[:-1]
            layer: int | None = owner.layer
            while layer is not None and parts and layer not in prefixes:
                prefixes[layer] = "/".join(parts)
                parts.pop()
                layer = layer_above.get(layer)
        else:
            unread.append(index)
    # A weight no saved function reads (the dead one, often) shares its layer's path.
    for index in unread:
        variable = variables[index]
        owner = owners.get(node_of[index])
        scope, _, leaf = variable.name.rpartition("/")
        if owner is not None and owner.layer in prefixes and leaf:
            variable.name = f"{prefixes[owner.layer]}/{leaf}"
        elif counts[variable.name] > 1 and variable.path:
            segments = variable.path.split(".")
            parts = segments[:-1] if owner is None else segments[owner.outermost : -1]
            prefix = [scope] if owner is not None and scope else []
            variable.name = "/".join([*prefix, *parts, leaf or segments[-1].lstrip("_")])


def _scoped_name(scope: str, leaf: str, reader: str | None, owner: _Owners | None) -> str | None:
    """The Keras path read off the scopes of an op that reads the variable, or None.

    The op's first scopes name the Keras layers called from the outermost one down to the
    variable's owner. The variable's saved scope is where the chain was when Keras created it
    (a functional model's layers are created outside the model: "block", not
    "functional/block"), so the path starts where the saved scope does. TensorFlow makes each
    layer's scope unique within the function: when the first one carries a suffix
    ("block_1"), every level does.
    """
    if reader is None or owner is None or not scope or not leaf:
        return None
    saved = scope.split("/")
    scopes = reader.split("/")
    if len(scopes) <= owner.layers:
        return None
    chain = scopes[: owner.layers]
    stripped = [_UNIQUE_SUFFIX.sub("", layer) for layer in chain]
    # suffixed[i]: every layer from i down carries a suffix
    suffixed = [True] * (len(chain) + 1)
    for i in range(len(chain) - 1, -1, -1):
        suffixed[i] = suffixed[i + 1] and stripped[i] != chain[i]
    for start in range(len(chain) - len(saved) + 1):
        if chain[start] == saved[0]:
            layers = chain[start:]
        elif suffixed[start] and stripped[start] == saved[0]:
            layers = stripped[start:]
        else:
            continue
        if layers[: len(saved)] == saved:
            return "/".join([*layers, leaf])
    return None


def _keras_owners(
    children: list[list[tuple[int, str]]],
) -> tuple[dict[int, _Owners], dict[int, int]]:
    """Node id -> its Keras owners, along the breadth-first paths that name the nodes; and
    each Keras layer's node -> the node of the Keras layer above it."""
    depth = {0: 0}
    owners: dict[int, _Owners] = {}
    layer_above: dict[int, int] = {}
    queue = deque([0])
    while queue:
        node_id = queue.popleft()
        below = children[node_id]
        if _KERAS_LAYER_CHILDREN <= {local_name for _, local_name in below}:
            above = owners.get(node_id)
            if above is not None:
                layer_above[node_id] = above.layer
            owners[node_id] = (
                _Owners(above.outermost, above.layers + 1, node_id)
                if above is not None
                else _Owners(depth[node_id], 1, node_id)
            )
        for child_id, _ in below:
            if child_id not in depth:
                depth[child_id] = depth[node_id] + 1
                if node_id in owners:
                    owners[child_id] = owners[node_id]
                queue.append(child_id)
    return owners, layer_above


def _readers(meta_graph: Any, functions: Mapping[str, Any], wanted: set[int]) -> dict[int, str]:
    """Object node id -> the name of the first op of a saved function that reads it."""
    if not wanted:
        return {}
    readers: dict[int, str] = {}
    saved_functions = meta_graph.object_graph_def.concrete_functions
    for name in sorted(saved_functions):
        bound = list(saved_functions[name].bound_inputs)
        fdef = functions.get(name)
        if fdef is None or not bound or len(bound) > len(fdef.signature.input_arg):
            continue
        captured = fdef.signature.input_arg[len(fdef.signature.input_arg) - len(bound) :]
        node_of_arg = {
            arg.name: node_id
            for arg, node_id in zip(captured, bound)
            if node_id in wanted and node_id not in readers
        }
        if not node_of_arg:
            continue
        for node_def in node_defs(fdef):
            if node_def.op in functions:
                continue
            for text in node_def.input:
                node_id = node_of_arg.get(text)
                if node_id is not None:
                    readers.setdefault(node_id, node_def.name)
    return readers
