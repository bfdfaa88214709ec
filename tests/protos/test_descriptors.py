"""The classes a SavedModel check reads with are TensorFlow's own messages: the same descriptors,
read from its generated modules' source, and a real SavedModel reads the same through them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.protos.descriptors import (
    _from_source,
    messages,
    serialized_file,
    with_serialized_node_defs,
)
from gradcheck_cli.protos.tf_protos import node_name, parse_node_def, protos

_IMPLEMENTATION = "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"


def _files_of_a_saved_model() -> list[Any]:
    """The FileDescriptors saved_model.proto depends on, itself included, dependencies first."""
    files: list[Any] = []

    def add(file: Any) -> None:
        if file not in files:
            for dependency in file.dependencies:
                add(dependency)
            files.append(file)

    add(protos().saved_model_pb2.DESCRIPTOR)
    return files


def test_every_descriptor_read_from_source_is_the_one_its_module_adds() -> None:
    files = _files_of_a_saved_model()
    assert len(files) > 10
    for file in files:
        module = file.name.removesuffix(".proto").replace("/", ".") + "_pb2"
        assert _from_source(module) == file.serialized_pb, file.name
        assert serialized_file(file.name) == file.serialized_pb, file.name


def test_a_file_without_a_generated_module_has_no_source_descriptor() -> None:
    assert _from_source("tensorflow.core.framework.no_such_pb2") is None
    assert _from_source("no_such_package.types_pb2") is None


@pytest.mark.parametrize(
    ("module", "message_name", "field_name"),
    [("function_pb2", "FunctionDef", "node_def"), ("graph_pb2", "GraphDef", "node")],
)
def test_only_the_nodes_of_functions_and_graphs_become_bytes(
    module: str, message_name: str, field_name: str
) -> None:
    from google.protobuf import descriptor_pb2

    file = getattr(protos(), module).DESCRIPTOR
    edited = descriptor_pb2.FileDescriptorProto.FromString(
        with_serialized_node_defs(file.serialized_pb, message_name, field_name)
    )
    expected = descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb)
    (message,) = (m for m in expected.message_type if m.name == message_name)
    (nodes,) = (f for f in message.field if f.name == field_name)
    nodes.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    nodes.ClearField("type_name")
    assert edited == expected
    nodes_field = messages().SavedModel.DESCRIPTOR.file.pool.FindFieldByName(
        f"tensorflow.{message_name}.{field_name}"
    )
    assert nodes_field.type == nodes_field.TYPE_BYTES


def test_a_graph_keeps_its_nodes_serialized_and_reads_as_tensorflows() -> None:
    graph_pb2 = protos().graph_pb2
    graph = graph_pb2.GraphDef()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = 1
    graph.node.add(name="y", op="Identity", input=["x"])
    read = messages().GraphDef.FromString(graph.SerializeToString())
    assert [node_name(node) for node in read.node] == ["x", "y"]
    assert read.SerializeToString() == graph.SerializeToString()


def test_a_file_that_is_not_function_proto_is_refused_for_the_edit() -> None:
    with pytest.raises(ValueError, match="no FunctionDef.node_def"):
        with_serialized_node_defs(protos().types_pb2.DESCRIPTOR.serialized_pb)


def test_the_dtype_enum_is_tensorflows() -> None:
    types_pb2 = protos().types_pb2
    data_type = messages().DataType
    assert {v.name: v.number for v in data_type.values} == dict(types_pb2.DataType.items())


def _data(message: Any) -> dict[str, Any]:
    """Every field a message holds, as plain values: NodeDefs kept serialized are parsed."""
    return {field.name: _value(field, value) for field, value in message.ListFields()}


def _value(field: Any, value: Any) -> Any:
    if field.full_name in ("tensorflow.FunctionDef.node_def", "tensorflow.GraphDef.node"):
        return [_data(parse_node_def(node, "f")) for node in value]
    if field.message_type is None:
        return list(value) if isinstance(value, Sequence) and field.is_repeated else value
    if isinstance(value, Mapping):
        entry = field.message_type.fields_by_name["value"]
        return {key: _value(entry, item) for key, item in value.items()}
    if field.is_repeated:
        return [_data(item) for item in value]
    return _data(value)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SavedModel with control flow, nested functions, custom gradients and debug info."""
    import tensorflow as tf

    from tests.savedmodel.zoo import Zoo

    path = tmp_path_factory.mktemp("descriptors") / "zoo"
    options = tf.saved_model.SaveOptions(save_debug_info=True)
    tf.saved_model.save(Zoo(), str(path), options=options)
    return path


@pytest.mark.parametrize("model", ["zoo", "saved"])
def test_a_saved_model_reads_as_with_tensorflows_own_classes(
    model: str, request: pytest.FixtureRequest
) -> None:
    path: Path = request.getfixturevalue(model)
    data = (path / "saved_model.pb").read_bytes()
    ours = messages().SavedModel.FromString(data)
    theirs = protos().saved_model_pb2.SavedModel.FromString(data)
    (library,) = (meta_graph.graph_def.library for meta_graph in ours.meta_graphs)
    assert library.function and all(
        isinstance(node, bytes) for function in library.function for node in function.node_def
    )
    assert _data(ours) == _data(theirs)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(
        deterministic=True
    )


def test_debug_info_reads_as_with_tensorflows_own_class(zoo: Path) -> None:
    data = (zoo / "debug" / "saved_model_debug_info.pb").read_bytes()
    ours = messages().GraphDebugInfo.FromString(data)
    theirs = protos().graph_debug_info_pb2.GraphDebugInfo.FromString(data)
    assert ours.traces_by_id or ours.traces
    assert _data(ours) == _data(theirs)


def test_protobufs_pure_python_implementation_reads_the_same_report(zoo: Path) -> None:
    # Without upb, the pool and classes come from protobuf's public modules instead.
    def report(implementation: str | None) -> str:
        env = {k: v for k, v in os.environ.items() if k != _IMPLEMENTATION}
        if implementation is not None:
            env[_IMPLEMENTATION] = implementation
        command = [sys.executable, "-m", "gradcheck_cli", str(zoo), "--loss", "loss", "-f", "json"]
        ran = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        assert ran.returncode == 1, ran.stderr
        return ran.stdout

    upb = report(None)
    assert '"status": "blocked"' in upb
    assert report("python") == upb
