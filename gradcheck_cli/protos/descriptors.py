"""The message classes a SavedModel is read with, built from the serialized descriptors that
TensorFlow's generated modules hold, without running those modules."""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

_SAVED_MODEL = "tensorflow/core/protobuf/saved_model.proto"
_FUNCTION = "tensorflow/core/framework/function.proto"
_GRAPH = "tensorflow/core/framework/graph.proto"
_SERIALIZED_NODES = {_FUNCTION: ("FunctionDef", "node_def"), _GRAPH: ("GraphDef", "node")}
"""The fields of NodeDefs that this pool keeps serialized: a proto file's (message, field)."""

_ADDED = "DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile("
"""How a generated module (protoc 3.20 and later) hands its file's descriptor to the pool: one
line, the serialized FileDescriptorProto as a bytes literal."""

# Field numbers in descriptor.proto.
_DEPENDENCY, _MESSAGE_TYPE = 3, 4  # FileDescriptorProto
_NAME, _FIELD = 1, 2  # DescriptorProto (a field's name is field 1 as well)
_TYPE, _TYPE_NAME = 5, 6  # FieldDescriptorProto
_TYPE_BYTES = 12  # FieldDescriptorProto.Type


@functools.cache
def messages() -> types.SimpleNamespace:
    """The classes of the messages a SavedModel check reads (`messages().SavedModel`), and
    the `DataType` enum's descriptor, from one pool of TensorFlow's own descriptors.

    Importing the generated modules runs protobuf's pure-Python descriptor machinery and builds
    a class for every message of every file (about 20 ms, more than reading ResNet50). Here the
    pool is given the same serialized descriptors, read from the modules' source, and only the
    classes asked for are made; the rest are made when first met.

    In this pool `FunctionDef.node_def` and `GraphDef.node` hold bytes: see
    `tf_protos.node_defs`. A parsed
    NodeDef takes about twelve times its serialized size (its attribute maps above all): 800 MB
    for a million ops. Kept as bytes, a node costs its size until it is read, and the functions
    the loss never calls are never read. The bytes are the field's own wire format, so the
    same data parses with either class.
    """
    pool, message_class = _new_pool()
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added:
            return
        added.add(name)
        serialized = serialized_file(name)
        for dependency in _strings(serialized, _DEPENDENCY):
            add(dependency)
        if name in _SERIALIZED_NODES:
            serialized = with_serialized_node_defs(serialized, *_SERIALIZED_NODES[name])
        pool.AddSerializedFile(serialized)

    add(_SAVED_MODEL)

    def find(name: str) -> Any:
        return message_class(pool.FindMessageTypeByName(f"tensorflow.{name}"))

    return types.SimpleNamespace(
        SavedModel=find("SavedModel"),
        NodeDef=find("NodeDef"),
        GraphDef=find("GraphDef"),
        FunctionDefLibrary=find("FunctionDefLibrary"),
        GraphDebugInfo=find("GraphDebugInfo"),
        OpList=find("OpList"),
        VariableDef=find("VariableDef"),
        DataType=pool.FindEnumTypeByName("tensorflow.DataType"),
    )


def _new_pool() -> tuple[Any, Callable[[Any], Any]]:
    """An empty descriptor pool, and what makes a message class of one of its descriptors."""
    from google.protobuf.internal import api_implementation

    if api_implementation.Type() != "upb":
        from google.protobuf import descriptor_pool, message_factory

        return descriptor_pool.DescriptorPool(), message_factory.GetMessageClass
    # What descriptor_pool and message_factory hand out under upb, without importing them:
    # their module-level set-up imports the pure-Python implementation (python_message,
    # text_format) even when upb is the one in use. upb makes the classes of the messages a
    # class holds when they are first met.
    from google.protobuf import message
    from google.protobuf.pyext import cpp_message

    def message_class(descriptor: Any) -> Any:
        return cpp_message.GeneratedProtocolMessageType(
            descriptor.name, (message.Message,), {"DESCRIPTOR": descriptor, "__module__": None}
        )

    return cpp_message._message.DescriptorPool(), message_class


def serialized_file(name: str) -> bytes:
    """The serialized FileDescriptorProto of proto file `name`
    ("tensorflow/core/framework/types.proto"), as its generated module (types_pb2) adds it to
    protobuf's pool: read from the module's source, or from the module itself when it is
    imported already or its source does not hold the descriptor as protoc 3.20 writes it."""
    module = name.removesuffix(".proto").replace("/", ".") + "_pb2"
    if module not in sys.modules:
        serialized = _from_source(module)
        if serialized is not None:
            return serialized
    from gradcheck_cli.protos.tf_protos import generated_module

    serialized = generated_module(module).DESCRIPTOR.serialized_pb
    assert isinstance(serialized, bytes)
    return serialized


def _from_source(module: str) -> bytes | None:
    package, _, rest = module.partition(".")
    relative = rest.replace(".", os.sep) + ".py"
    for folder in _package_folders(package):
        try:
            with open(os.path.join(folder, relative), encoding="utf-8") as source:
                for line in source:
                    if line.startswith(_ADDED):
                        literal = ast.literal_eval(line[len(_ADDED) :].rstrip().removesuffix(")"))
                        return literal if isinstance(literal, bytes) else None
        except (OSError, ValueError, SyntaxError):
            continue
    return None


@functools.cache
def _package_folders(package: str) -> tuple[str, ...]:
    spec = importlib.util.find_spec(package)  # a top-level package is found, not imported
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(spec.submodule_search_locations)


def with_serialized_node_defs(
    proto_file: bytes, message_name: str = "FunctionDef", field_name: str = "node_def"
) -> bytes:
    """A serialized FileDescriptorProto (function.proto's), with its message `message_name`'s
    field `field_name` (of NodeDefs) declared as bytes instead."""
    fields = []
    changed = 0
    for number, value, encoded in _fields(proto_file):
        if number == _MESSAGE_TYPE and _strings(value, _NAME) == [message_name]:
            message = []
            for field_number, field, field_encoded in _fields(value):
                if field_number == _FIELD and _strings(field, _NAME) == [field_name]:
                    field_encoded = _delimited(_FIELD, _as_bytes_field(field))
                    changed += 1
                message.append(field_encoded)
            encoded = _delimited(_MESSAGE_TYPE, b"".join(message))
        fields.append(encoded)
    if changed != 1:
        raise ValueError(f"the proto file holds no {message_name}.{field_name}")
    return b"".join(fields)


def _as_bytes_field(field: bytes) -> bytes:
    parts = []
    for number, _, encoded in _fields(field):
        if number == _TYPE:
            parts.append(_varint(_TYPE << 3) + _varint(_TYPE_BYTES))
        elif number != _TYPE_NAME:
            parts.append(encoded)
    return b"".join(parts)


def _strings(message: bytes, wanted: int) -> list[str]:
    """The values of length-delimited field `wanted` of a serialized message, as text."""
    return [
        value.decode()
        for number, value, _ in _fields(message)
        if number == wanted and isinstance(value, bytes)
    ]


def _fields(message: bytes) -> Iterator[tuple[int, bytes | int, bytes]]:
    """Each field of a serialized message: its number, its value (the bytes of a
    length-delimited field, else an integer) and its whole encoding."""
    position = 0
    while position < len(message):
        start = position
        tag, position = _read_varint(message, position)
        wire_type = tag & 7
        value: bytes | int
        if wire_type == 0:
            value, position = _read_varint(message, position)
        elif wire_type == 2:
            length, position = _read_varint(message, position)
            value = message[position : position + length]
            position += length
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            value = int.from_bytes(message[position : position + width], "little")
            position += width
        else:  # groups: descriptor.proto has none
            raise ValueError(f"a descriptor holds a field of wire type {wire_type}")
        if position > len(message):
            raise ValueError("a descriptor ends inside a field")
        yield tag >> 3, value, message[start:position]


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload
