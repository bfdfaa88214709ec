"""A node input as a FunctionDef or a GraphDef writes it ("node", "node:1",
"node:output_arg:0"), read into a `TensorRef` of a flat output index."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import TensorRef


def function_input(text: str, offsets: Mapping[str, dict[str, int]]) -> tuple[str, int] | None:
    """A function input as (producer, flat output index); None while its producer's outputs
    are not known (an output argument of a node not converted yet)."""
    parts = text.split(":")
    if len(parts) == 3 and parts[0] in offsets and is_index(parts[2]):
        index = int(parts[2])
        if index < MAX_INDEX:
            return sys.intern(parts[0]), offsets[parts[0]].get(parts[1], 0) + index
    if len(parts) == 3 and parts[0] and parts[0] not in offsets:
        return None
    return function_ref(text, offsets)


class Offsets(Mapping[str, dict[str, int]]):
    """A function's nodes' output argument offsets by node name, read off the layouts of
    the nodes converted so far (`GraphBuilder._function_body`)."""

    def __init__(self, ids: Mapping[str, int], layouts: list[dict[str, int]]) -> None:
        self._ids, self._layouts = ids, layouts

    def __getitem__(self, name: str) -> dict[str, int]:
        return self._layouts[self._ids[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


INDEX_DIGITS = 19
"""Output indices of fewer digits are below `MAX_INDEX`: read without asking."""


def is_index(text: str) -> bool:
    """True for an output index as TensorFlow writes it: ASCII digits ("²" and "١" are digits
    to Python, and the second even to int(), but not to TensorFlow)."""
    return text.isascii() and text.isdigit()


MAX_INDEX = 2**62
"""Output indices past this cannot be read by any graph (the expansion budget refuses far
smaller ones once the producer is known); refused as they are parsed."""


def graph_ref(text: str) -> TensorRef:
    name, _, index = text.partition(":")
    if not name or (index and not is_index(index)) or index and int(index) >= MAX_INDEX:
        raise GradcheckError(f"the model is malformed: a node input reads {text!r}")
    return TensorRef(name, int(index) if index else 0)


def function_ref(text: str, offsets: Mapping[str, dict[str, int]]) -> TensorRef:
    parts = text.split(":")
    if (
        not parts[0]
        or len(parts) > 3
        or len(parts) > 1
        and (not is_index(parts[-1]) or int(parts[-1]) >= MAX_INDEX)
    ):
        raise GradcheckError(f"the model is malformed: a function input reads {text!r}")
    node = sys.intern(parts[0])
    if len(parts) == 1:
        return TensorRef(node, 0)  # a function argument
    if len(parts) == 2:
        return TensorRef(node, int(parts[1]))
    out_arg, index = parts[1], int(parts[2])
    return TensorRef(node, offsets.get(node, {}).get(out_arg, 0) + index)
