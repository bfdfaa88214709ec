"""TensorFlow's generated protobuf modules, imported without starting the TensorFlow runtime."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.loaders.proto_limits import Refused

_MODULES = {
    "saved_model_pb2": "tensorflow.core.protobuf.saved_model_pb2",
    "meta_graph_pb2": "tensorflow.core.protobuf.meta_graph_pb2",
    "function_pb2": "tensorflow.core.framework.function_pb2",
    "graph_pb2": "tensorflow.core.framework.graph_pb2",
    "op_def_pb2": "tensorflow.core.framework.op_def_pb2",
    "types_pb2": "tensorflow.core.framework.types_pb2",
    "variable_pb2": "tensorflow.core.framework.variable_pb2",
    "graph_debug_info_pb2": "tensorflow.core.framework.graph_debug_info_pb2",
}


@functools.cache
def protos() -> types.SimpleNamespace:
    """The pb2 modules gradcheck reads, as attributes (`protos().saved_model_pb2`).

    Importing `tensorflow.core...` normally runs `tensorflow/__init__.py`, which loads the whole
    runtime (about 2 s). When TensorFlow is not imported yet, a stand-in package object with the
    real package path lets only the generated modules load; the stand-in is removed afterwards
    so a later `import tensorflow` runs the real package.
    """
    if "tensorflow" in sys.modules:
        return _import_all()
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise GradcheckError("TensorFlow is not installed: pip install tensorflow")
    stand_in = types.ModuleType("tensorflow")
    stand_in.__path__ = list(spec.submodule_search_locations)
    sys.modules["tensorflow"] = stand_in
    try:
        return _import_all()
    finally:
        if sys.modules.get("tensorflow") is stand_in:
            del sys.modules["tensorflow"]


def _import_all() -> types.SimpleNamespace:
    return types.SimpleNamespace(
        **{short: importlib.import_module(full) for short, full in _MODULES.items()}
    )


def dtype_name(enum_value: int) -> str:
    """`DT_FLOAT` -> "float32", `DT_INT32_REF` -> "int32_ref", as TensorFlow names dtypes."""
    types_pb2 = protos().types_pb2
    ref = enum_value > 100
    base = enum_value - 100 if ref else enum_value
    # The proto keeps enum values it does not know; DataType.Name would raise a ValueError.
    if base not in _known_dtypes() or (ref and base == 0):
        raise Refused(f"has dtype {enum_value}, which is not a TensorFlow DataType")
    raw = types_pb2.DataType.Name(base)
    name = _DTYPE_NAMES.get(raw, raw.removeprefix("DT_").lower())
    return name + "_ref" if ref else name


@functools.cache
def _known_dtypes() -> frozenset[int]:
    return frozenset(protos().types_pb2.DataType.values())


_DTYPE_NAMES = {
    "DT_FLOAT": "float32",
    "DT_DOUBLE": "float64",
    "DT_HALF": "float16",
    "DT_BFLOAT16": "bfloat16",
    "DT_COMPLEX64": "complex64",
    "DT_COMPLEX128": "complex128",
    "DT_INVALID": "invalid",
}
