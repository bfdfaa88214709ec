"""How much of the graph model a saved_model.pb may expand to, and the error when it asks more.

A proto is data an attacker may craft: a 12-byte attribute (`num: 268435456`) can declare a
quarter of a billion outputs. Everything the loader expands from an attribute, a list length or
an output index draws from one budget proportional to the file, so a small file can never cost
more than a proportional amount of memory or time.
"""

from __future__ import annotations

from typing import Any

from gradcheck_cli.errors import GradcheckError

ITEMS_PER_BYTE = 8
"""Graph-model items (tensor outputs, list elements, loss candidates, characters of object
paths) a file may expand to per byte of its serialized size."""

MINIMUM_ITEMS = 2**20
"""The budget of a small file: far above any real model's few thousand outputs per op."""

MAX_RANK = 254
"""TensorFlow's own limit on the rank of a shape (TensorShape::MaxDimensions)."""


class Refused(GradcheckError):
    """What is wrong with one proto element ("declares -5 outputs (num=-5)"); whoever converts
    the element names it with `malformed`."""


def malformed(what: str, where: str, refused: Refused | str) -> GradcheckError:
    """The one wording of a refusal: "malformed SavedModel: node 'x' in function 'f' ..."."""
    return GradcheckError(f"malformed {what}: {where} {refused}")


class ExpansionBudget:
    """Items left to expand; `spend` refuses, before anything is allocated, what would overdraw."""

    def __init__(self, serialized_bytes: int, source: str = "model") -> None:
        self.serialized_bytes = serialized_bytes
        self.source = source
        self.limit = max(MINIMUM_ITEMS, ITEMS_PER_BYTE * serialized_bytes)
        self.left = self.limit

    def spend(self, items: int, fact: str) -> None:
        """Take `items`; `fact` says what asks for them ("declares 9 outputs (num=9)")."""
        if items < 0:
            raise Refused(fact)
        if items > self.left:
            raise Refused(
                f"{fact}, more than the {self.limit} items gradcheck expands a "
                f"{self.serialized_bytes}-byte {self.source} to ({ITEMS_PER_BYTE} per byte, "
                f"at least {MINIMUM_ITEMS})"
            )
        self.left -= items


def shape_dims(shape_proto: Any) -> tuple[int | None, ...] | None:
    """A TensorShapeProto as dimensions (None: unknown), or None for an unknown rank."""
    if shape_proto.unknown_rank:
        return None
    if len(shape_proto.dim) > MAX_RANK:
        raise Refused(f"has a shape of rank {len(shape_proto.dim)}, above TensorFlow's {MAX_RANK}")
    dims = tuple(dim.size for dim in shape_proto.dim)
    if any(size < -1 for size in dims):
        raise Refused(f"has a shape with a dimension below -1 ({min(dims)})")
    return tuple(None if size < 0 else size for size in dims)
