"""Read a saved function's output signature (a StructuredValue): its leaf keys and shapes."""

from __future__ import annotations

from typing import Any

from gradcheck_cli.protos.limits import ExpansionBudget, shape_dims


def flat_outputs(structure: Any, budget: ExpansionBudget, prefix: str = "") -> list[str]:
    """Leaf keys of a StructuredValue in TensorFlow's flattening order (dict keys sorted)."""
    kind = structure.WhichOneof("kind")
    if kind == "dict_value":
        out: list[str] = []
        for key in sorted(structure.dict_value.fields):
            out += flat_outputs(structure.dict_value.fields[key], budget, f"{prefix}{key}/")
        return out
    if kind in ("list_value", "tuple_value", "named_tuple_value"):
        values = (
            structure.named_tuple_value.values
            if kind == "named_tuple_value"
            else getattr(structure, kind).values
        )
        out = []
        for i, value in enumerate(values):
            key = value.key if kind == "named_tuple_value" else str(i)
            inner = value.value if kind == "named_tuple_value" else value
            out += flat_outputs(inner, budget, f"{prefix}{key}/")
        return out
    if kind in ("tensor_spec_value", "bounded_tensor_spec_value", "type_spec_value"):
        # Keys repeat their parents' keys: a deep structure would multiply them.
        budget.spend(len(prefix), "has an output signature with keys too long")
        return [prefix.rstrip("/")]
    return []


def output_shape(saved: Any, index: int) -> tuple[int | None, ...] | None:
    """The static shape of output `index` of a saved concrete function, when it says."""
    specs: list[Any] = []
    _tensor_specs(saved.output_signature, specs)
    if index >= len(specs) or specs[index] is None:
        return None
    return shape_dims(specs[index])


def _tensor_specs(structure: Any, specs: list[Any]) -> None:
    """Append the shape of each tensor of a structured value to `specs`, in output order (None
    for one that says none). A module function, not a closure: a recursive closure is a cycle,
    and a cycle holding a part of the SavedModel keeps all of it until a collection."""
    kind = structure.WhichOneof("kind")
    if kind == "dict_value":
        for key in sorted(structure.dict_value.fields):
            _tensor_specs(structure.dict_value.fields[key], specs)
    elif kind in ("list_value", "tuple_value"):
        for value in getattr(structure, kind).values:
            _tensor_specs(value, specs)
    elif kind == "named_tuple_value":
        for pair in structure.named_tuple_value.values:
            _tensor_specs(pair.value, specs)
    elif kind == "tensor_spec_value":
        specs.append(structure.tensor_spec_value.shape)
    elif kind in ("bounded_tensor_spec_value", "type_spec_value"):
        specs.append(None)
