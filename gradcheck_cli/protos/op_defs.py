"""OpDefs: the output layout of every op type, from the model itself or gradcheck's snapshot."""

from __future__ import annotations

import functools
import gzip
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from typing import Any

from gradcheck_cli.protos.descriptors import messages


@functools.cache
def snapshot_op_defs() -> dict[str, Any]:
    """Every OpDef of the TensorFlow the snapshot was generated from (differentiability/data)."""
    data = resources.files("gradcheck_cli.differentiability").joinpath("data/op_defs.pb.gz")
    op_list = messages().OpList()
    op_list.ParseFromString(gzip.decompress(data.read_bytes()))
    return {op.name: op for op in op_list.op}


class _MergedOpDefs(Mapping[str, Any]):
    """The model's own OpDefs, which win; the snapshot's for the ops a stripped list leaves out.

    The snapshot is read at the first op the model's list lacks: TensorFlow lists every op a
    SavedModel uses, and reading the snapshot's two thousand OpDefs costs as much as building
    a small model's graph.
    """

    def __init__(self, from_model: Iterable[Any]) -> None:
        self._ops = {op.name: op for op in from_model}
        self._with_snapshot = False

    def get(self, name: str, default: Any = None) -> Any:  # per node: no KeyError per miss
        found = self._ops.get(name)
        if found is None and not self._with_snapshot:
            found = self._merged().get(name)
        return default if found is None else found

    def __getitem__(self, name: str) -> Any:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())

    def _merged(self) -> dict[str, Any]:
        if not self._with_snapshot:
            self._ops = {**snapshot_op_defs(), **self._ops}
            self._with_snapshot = True
        return self._ops


def merged_op_defs(from_model: Iterable[Any]) -> Mapping[str, Any]:
    """The model's own OpDefs win; the snapshot fills in the ops a stripped list leaves out."""
    return _MergedOpDefs(from_model)
