"""TensorFlow's gradient registry, as snapshotted in data/registry.json; no TensorFlow import."""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class GradientRegistry:
    """What TensorFlow knows about each op type's gradient (see snapshot.py for how it is read)."""

    tensorflow_version: str
    # Registered with `tf.no_gradient`: every input gets None.
    not_differentiable: frozenset[str]
    # Registered with a gradient function.
    registered: frozenset[str]
    # Input positions for which the gradient function always returns a literal None.
    none_inputs: Mapping[str, frozenset[int]]
    # Gradient functions that return nothing but None.
    all_none: frozenset[str]

    def has_entry(self, op_type: str) -> bool:
        """False for op types on which `tf.gradients` raises LookupError."""
        return op_type in self.registered or op_type in self.not_differentiable


@functools.cache
def load_registry() -> GradientRegistry:
    """The snapshot shipped with gradcheck, read once."""
    package = importlib.resources.files("gradcheck_cli.differentiability")
    resource = package / "data" / "registry.json"
    data = json.loads(resource.read_text(encoding="utf-8"))
    return GradientRegistry(
        tensorflow_version=data["tensorflow_version"],
        not_differentiable=frozenset(data["not_differentiable"]),
        registered=frozenset(data["registered"]),
        none_inputs={op: frozenset(positions) for op, positions in data["none_inputs"].items()},
        all_none=frozenset(data["all_none"]),
    )
