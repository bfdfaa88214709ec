"""TensorFlow's protos read without starting its runtime: its generated modules, the NodeDefs
a FunctionDef keeps serialized, and dtype names."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.protos.descriptors import messages
from gradcheck_cli.protos.limits import Refused, malformed

_MODULES = {
    "saved_model_pb2": "tensorflow.core.protobuf.saved_model_pb2",
    "meta_graph_pb2": "tensorflow.core.protobuf.meta_graph_pb2",
    "function_pb2": "tensorflow.core.framework.function_pb2",
    "graph_pb2": "tensorflow.core.framework.graph_pb2",
    "op_def_pb2": "tensorflow.core.framework.op_def_pb2",
    "types_pb2": "tensorflow.core.framework.types_pb2",
    "variable_pb2": "tensorflow.core.framework.variable_pb2",
    "graph_debug_info_pb2": "tensorflow.core.framework.graph_debug_info_pb2",
    "node_def_pb2": "tensorflow.core.framework.node_def_pb2",
}


@functools.cache
def protos() -> types.SimpleNamespace:
    """The pb2 modules gradcheck reads, as attributes (`protos().saved_model_pb2`).

    Only the routes that hold TensorFlow's own messages (a trace, a text SavedModel) need
    them: a SavedModel check reads with `descriptors.messages()`.
    """
    return types.SimpleNamespace(
        **{short: generated_module(full) for short, full in _MODULES.items()}
    )


def generated_module(name: str) -> types.ModuleType:
    """The generated module `name` ("tensorflow.core.framework.types_pb2").

    Importing `tensorflow.core...` normally runs `tensorflow/__init__.py`, which loads the whole
    runtime (about 2 s). When TensorFlow is not imported yet, a stand-in package object with the
    real package path lets only the generated modules load; the stand-in is removed afterwards
    so a later `import tensorflow` runs the real package.
    """
    if "tensorflow" in sys.modules or not name.startswith("tensorflow."):
        return importlib.import_module(name)
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise GradcheckError("TensorFlow is not installed: pip install tensorflow")
    stand_in = types.ModuleType("tensorflow")
    stand_in.__path__ = list(spec.submodule_search_locations)
    sys.modules["tensorflow"] = stand_in
    try:
        return importlib.import_module(name)
    finally:
        if sys.modules.get("tensorflow") is stand_in:
            del sys.modules["tensorflow"]


def node_defs(function: Any, what: str = "SavedModel") -> Iterator[Any]:
    """The NodeDefs of a FunctionDef, whether its class keeps them parsed or serialized.
    `what` names the input in the error for a node that does not parse."""
    for node in function.node_def:
        yield parse_node_def(node, function.signature.name, what)


def parse_node_def(node: Any, function: str, what: str = "SavedModel") -> Any:
    """A NodeDef of function `function` ("": of the graph), parsed if it is kept serialized."""
    if not isinstance(node, bytes):
        return node
    try:
        return messages().NodeDef.FromString(node)
    except Exception as error:  # protobuf's DecodeError, and anything else a bad proto raises
        raise malformed(
            what,
            f"function {function!r}" if function else "the graph",
            f"holds a node that is not a readable NodeDef ({error})",
        ) from None


def node_name(node: Any, what: str = "SavedModel") -> str:
    """The name of a graph's NodeDef, kept serialized or parsed."""
    if isinstance(node, bytes):
        split = split_node_def(node)
        if split is not None:
            return split[0]
    return str(parse_node_def(node, "", what).name)


_NAME, _OP, _INPUT = 0x0A, 0x12, 0x1A
"""The wire tags of NodeDef's fields 1 to 3 (name, op, input), each length-delimited."""


def split_node_def(raw: bytes) -> tuple[str, str, list[str], bytes] | None:
    """A serialized NodeDef's name, op type and inputs, and the bytes of all its other
    fields (attributes, device, debug info), without parsing those: TensorFlow writes the
    fields in number order. None when the bytes do not start with a name, then an op type,
    then inputs, each well formed (the caller then parses the whole message)."""
    # The short way, for most nodes: a name, an op type and inputs of one length byte each
    # (shorter than 128 bytes). Anything else is read by the general way below.
    size = len(raw)
    if size > 3 and raw[0] == _NAME and raw[1] < 0x80:
        op_at = raw[1] + 2
        if op_at + 1 < size and raw[op_at] == _OP and raw[op_at + 1] < 0x80:
            position = op_at + 2 + raw[op_at + 1]
            if position <= size:
                try:
                    name, op = raw[2:op_at].decode(), raw[op_at + 2 : position].decode()
                    inputs = []
                    while (
                        position + 1 < size and raw[position] == _INPUT and raw[position + 1] < 0x80
                    ):
                        start = position + 2
                        position = start + raw[position + 1]
                        if position > size:
                            return None
                        inputs.append(raw[start:position].decode())
                except UnicodeDecodeError:
                    return None
                if position == size or raw[position] != _INPUT:
                    return name, op, inputs, raw[position:]
    return _split_node_def(raw)


def _split_node_def(raw: bytes) -> tuple[str, str, list[str], bytes] | None:
    """`split_node_def`'s general way: any length of each field."""
    texts: list[str] = []
    position, size = 0, len(raw)
    expected = _NAME
    try:
        while position < size and raw[position] == expected:
            start, position = _delimited(raw, position + 1, size)
            texts.append(raw[start:position].decode())
            expected = _OP if expected == _NAME else _INPUT
    except (IndexError, ValueError):  # cut short, too long, not UTF-8 (a ValueError)
        return None
    if len(texts) < 2:
        return None
    return texts[0], texts[1], texts[2:], raw[position:]


_ATTR, _KEY, _VALUE, _FUNC = 0x2A, 0x0A, 0x12, 0x52
"""Wire tags: NodeDef's attr entries (field 5), a map entry's key and value (fields 1 and 2),
and AttrValue's func (field 10), whose NameAttrList names the function first (field 1)."""


def cut_callees(rest: bytes) -> tuple[tuple[bytes, ...], tuple[tuple[str, str], ...]] | None:
    """The bytes of a NodeDef's fields after its inputs (`split_node_def`'s last part) in
    pieces around the name of each function an attribute holds, and those (attribute,
    function name) pairs in order: nodes that differ only in the functions they call have the
    same pieces. None when no attribute holds a function by its name alone, or when the bytes
    are not all well-formed length-delimited fields (the caller then parses the message)."""
    pieces: list[bytes] = []
    names: list[tuple[str, str]] = []
    position, size, kept = 0, len(rest), 0
    try:
        while position < size:
            tag = rest[position]
            if tag >= 0x80 or tag & 7 != 2:  # NodeDef's fields after its inputs: all of bytes
                return None
            start, end = _delimited(rest, position + 1, size)
            if tag == _ATTR and start < end and rest[start] == _KEY:
                key_start, key_end = _delimited(rest, start + 1, end)
                if key_end < end and rest[key_end] == _VALUE:
                    value_start, value_end = _delimited(rest, key_end + 1, end)
                    if value_start < value_end and rest[value_start] == _FUNC:
                        func_start, func_end = _delimited(rest, value_start + 1, value_end)
                        if func_start < func_end and rest[func_start] == _KEY:
                            name_start, name_end = _delimited(rest, func_start + 1, func_end)
                            pieces.append(rest[kept:name_start])
                            kept = name_end
                            names.append(
                                (
                                    rest[key_start:key_end].decode(),
                                    rest[name_start:name_end].decode(),
                                )
                            )
            position = end
    except (IndexError, ValueError):  # cut short, too long, not UTF-8 (a ValueError)
        return None
    if not names:
        return None
    pieces.append(rest[kept:])
    return tuple(pieces), tuple(names)


def _delimited(raw: bytes, position: int, end: int) -> tuple[int, int]:
    """The span of a length-delimited field whose length (a varint) starts at `position`;
    ValueError if it reaches past `end`."""
    length, shift = 0, 0
    while True:
        byte = raw[position]
        position += 1
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 28:
            raise ValueError("a length of more than 5 bytes")
    if position + length > end:
        raise ValueError("a field past its message's end")
    return position, position + length


@functools.cache  # asked for every output of every node; a refusal is not kept
def dtype_name(enum_value: int) -> str:
    """`DT_FLOAT` -> "float32", `DT_INT32_REF` -> "int32_ref", as TensorFlow names dtypes."""
    ref = enum_value > 100
    base = enum_value - 100 if ref else enum_value
    # The proto keeps enum values it does not know; DataType.Name would raise a ValueError.
    if base not in _known_dtypes() or (ref and base == 0):
        raise Refused(f"has dtype {enum_value}, which is not a TensorFlow DataType")
    raw = messages().DataType.values_by_number[base].name
    name = _DTYPE_NAMES.get(raw, raw.removeprefix("DT_").lower())
    return name + "_ref" if ref else name


@functools.cache
def _known_dtypes() -> frozenset[int]:
    return frozenset(messages().DataType.values_by_number)


_DTYPE_NAMES = {
    "DT_FLOAT": "float32",
    "DT_DOUBLE": "float64",
    "DT_HALF": "float16",
    "DT_BFLOAT16": "bfloat16",
    "DT_COMPLEX64": "complex64",
    "DT_COMPLEX128": "complex128",
    "DT_INVALID": "invalid",
}
