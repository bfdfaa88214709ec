"""How much of the graph model a saved_model.pb may expand to, and the error when it asks more.

A proto is data an attacker may craft: a 12-byte attribute (`num: 268435456`) can declare a
quarter of a billion outputs. Everything the loader expands from an attribute, a list length or
an output index draws from one budget proportional to the file, so a small file can never cost
more than a proportional amount of memory or time.
"""

from __future__ import annotations

from typing import Any

from gradcheck_cli.errors import GradcheckError

ITEMS_PER_BYTE = 1
"""Graph-model items a file may expand to per byte of its serialized size: tensor outputs, type
list elements, output indices read past a node's declared outputs, and input-output pairs of a
node (the walkers' work through a node grows with their product)."""

MINIMUM_ITEMS = 2**17
"""The item budget of a small file: far above any real op's few thousand outputs."""

CHARACTERS_PER_BYTE = 64
"""Characters of object paths and loss-candidate names a file may expand to per byte."""

MINIMUM_CHARACTERS = 2**24
"""The character budget of a small file."""

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

    def __init__(
        self,
        serialized_bytes: int,
        source: str = "model",
        *,
        per_byte: int = ITEMS_PER_BYTE,
        minimum: int = MINIMUM_ITEMS,
        unit: str = "items",
    ) -> None:
        self.serialized_bytes = serialized_bytes
        self.source = source
        self.per_byte = per_byte
        self.minimum = minimum
        self.unit = unit
        self.limit = max(minimum, per_byte * serialized_bytes)
        self.left = self.limit

    @classmethod
    def of_text(cls, serialized_bytes: int, source: str) -> ExpansionBudget:
        """The budget of characters: object paths and loss-candidate names."""
        return cls(
            serialized_bytes,
            source,
            per_byte=CHARACTERS_PER_BYTE,
            minimum=MINIMUM_CHARACTERS,
            unit="characters",
        )

    def spend(self, items: int, fact: str) -> None:
        """Take `items`; `fact` says what asks for them ("declares 9 outputs (num=9)")."""
        if items < 0:
            raise Refused(fact)
        if items > self.left:
            raise Refused(
                f"{fact}, more than the {self.limit} {self.unit} gradcheck expands a "
                f"{self.serialized_bytes}-byte {self.source} to ({self.per_byte} per byte, "
                f"at least {self.minimum})"
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
