"""OpDefs: the output layout of every op type, from the model itself or gradcheck's snapshot."""

from __future__ import annotations

import functools
import gzip
from collections.abc import Iterable
from importlib import resources
from typing import Any

from gradcheck_cli.protos.tf_protos import protos


@functools.cache
def snapshot_op_defs() -> dict[str, Any]:
    """Every OpDef of the TensorFlow the snapshot was generated from (differentiability/data)."""
    data = resources.files("gradcheck_cli.differentiability").joinpath("data/op_defs.pb.gz")
    op_list = protos().op_def_pb2.OpList()
    op_list.ParseFromString(gzip.decompress(data.read_bytes()))
    return {op.name: op for op in op_list.op}


def merged_op_defs(from_model: Iterable[Any]) -> dict[str, Any]:
    """The model's own OpDefs win; the snapshot fills in the ops a stripped list leaves out."""
    merged = dict(snapshot_op_defs())
    merged.update({op.name: op for op in from_model})
    return merged
