"""Keras's names, trainability, attribute paths and construction lines for a script's weights."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradcheck_cli.graph.model import SourceLocation


@dataclass
class KerasWeights:
    """What Keras knows about the weights of the layers bound in the script's namespace."""

    # id(backing tf.Variable) -> (Keras path, Keras trainable)
    info: dict[int, tuple[str, bool]] = field(default_factory=dict)
    # id(backing tf.Variable) -> attribute path ("model.proj.kernel")
    attributes: dict[int, str] = field(default_factory=dict)
    # id(backing tf.Variable) -> where the owning layer was constructed
    constructed_at: dict[int, SourceLocation] = field(default_factory=dict)


def keras_weights(
    namespace: dict[str, Any], layer_sites: dict[int, SourceLocation | None]
) -> KerasWeights:
    """Keras paths, trainability, attribute paths and construction lines of every weight."""
    found = KerasWeights()
    if "keras" not in sys.modules:
        return found
    import keras

    pending = [(name, value) for name, value in namespace.items() if not name.startswith("_")]
    seen: set[int] = set()
    while pending:
        path, value = pending.pop(0)
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, keras.layers.Layer):
            site = layer_sites.get(id(value))
            for weight in value.weights:
                backing = getattr(weight, "value", None)
                if backing is None:
                    continue
                # Breadth first: a deeper layer that owns the weight overwrites its parents.
                found.info[id(backing)] = (weight.path, bool(weight.trainable))
                found.attributes[id(backing)] = f"{path}.{weight.name}"
                if site is not None:
                    found.constructed_at[id(backing)] = site
            for attribute, member in vars(value).items():
                if not attribute.startswith("_"):
                    pending.append((f"{path}.{attribute}", member))
        elif isinstance(value, (list, tuple)):
            pending.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, dict):
            pending.extend((f"{path}[{key!r}]", item) for key, item in value.items())
    return found


def track_layer_construction(path: Path) -> dict[int, SourceLocation | None]:
    """Record the user's line that constructs each Keras layer (`self.proj = layers.Dense(32)`).

    Only for scripts that mention Keras: importing it costs a second.
    """
    sites: dict[int, SourceLocation | None] = {}
    try:
        if "keras" not in path.read_text(errors="replace"):
            return sites
    except OSError:
        return sites
    import keras

    from gradcheck_cli.loaders import traced

    original = keras.layers.Layer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        if id(self) not in sites:
            sites[id(self)] = traced.user_location(traceback.extract_stack()[:-1])
        original(self, *args, **kwargs)

    keras.layers.Layer.__init__ = init  # type: ignore[method-assign]
    return sites


def track_weight_owners(
    sites: dict[int, SourceLocation | None],
    keras_variables: dict[int, Any],
    owner_sites: dict[int, SourceLocation | None],
) -> None:
    """Record, for every weight a Keras layer adds, its Keras variable (by id of the backing
    tf.Variable) and the line that constructed the layer (`sites`, from
    `track_layer_construction`)."""
    import keras

    original = keras.layers.Layer.add_weight

    def add_weight(self: Any, *args: Any, **kwargs: Any) -> Any:
        weight = original(self, *args, **kwargs)
        backing = getattr(weight, "_value", None)
        if backing is not None:
            keras_variables[id(backing)] = weight
            owner_sites[id(backing)] = sites.get(id(self))
        return weight

    keras.layers.Layer.add_weight = add_weight  # type: ignore[method-assign]
