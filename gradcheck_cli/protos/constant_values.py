"""The small constants the analysis reads (zeros, where-conditions, slice bounds), from
TensorProtos."""

from __future__ import annotations

import functools
import struct
from typing import Any

from gradcheck_cli.graph.model import Constant
from gradcheck_cli.protos.descriptors import messages
from gradcheck_cli.protos.tf_protos import dtype_name

# Const values the analysis reads (zeros, where-conditions, slice bounds) are small; a larger
# constant is kept as an unknown value rather than copied into the model.
_MAX_CONSTANT_ELEMENTS = 64
# dtype -> (struct format of one element in tensor_content, the TensorProto field of values).
_CONSTANT_FORMATS = {
    "float32": ("f", "float_val"),
    "float64": ("d", "double_val"),
    "int32": ("i", "int_val"),
    "int64": ("q", "int64_val"),
    "bool": ("?", "bool_val"),
}


def constant_value(tensor: Any) -> Constant | None:
    """A small numeric or boolean TensorProto as a `Constant`; None for anything else."""
    if tensor.dtype not in _known_dtypes_of_constants():
        return None
    element, field_name = _CONSTANT_FORMATS[dtype_name(tensor.dtype)]
    shape = tuple(int(dim.size) for dim in tensor.tensor_shape.dim)
    if tensor.tensor_shape.unknown_rank or any(dim < 0 for dim in shape):
        return None
    size = 1
    for dim in shape:
        size *= dim
    if tensor.tensor_content:
        width = struct.calcsize(element)
        if size > _MAX_CONSTANT_ELEMENTS or len(tensor.tensor_content) != size * width:
            return None
        elements = struct.unpack(f"<{size}{element}", tensor.tensor_content)
    else:
        # A large constant of one repeated value (tf.zeros) is stored as that value alone.
        elements = tuple(getattr(tensor, field_name))
        if len(elements) > min(size, _MAX_CONSTANT_ELEMENTS):
            return None
    return Constant(shape, tuple(elements))


@functools.cache
def _known_dtypes_of_constants() -> frozenset[int]:
    named = messages().DataType.values_by_name
    return frozenset(
        named[name].number for name in ("DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_INT64", "DT_BOOL")
    )
