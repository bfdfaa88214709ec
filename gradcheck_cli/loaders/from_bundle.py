"""Build the graph model from a Bundle (the worker's output or an in-process trace)."""

from __future__ import annotations

from gradcheck_cli.graph.model import Program, SourceLocation, TensorRef, Variable
from gradcheck_cli.loaders.bundle import Bundle
from gradcheck_cli.loaders.graph_builder import GraphBuilder
from gradcheck_cli.loaders.loss_checks import validate_loss
from gradcheck_cli.loaders.op_defs import merged_op_defs
from gradcheck_cli.loaders.tf_protos import protos


def program_from_bundle(bundle: Bundle, *, sum_loss: bool = False) -> Program:
    p = protos()
    library = p.function_pb2.FunctionDefLibrary()
    library.ParseFromString(bundle.library)
    op_list = p.op_def_pb2.OpList()
    op_list.ParseFromString(bundle.op_defs)
    functions = {f.signature.name: f for f in library.function}
    locations = bundle.locations

    def locate(node: str, function: str) -> SourceLocation | None:
        return locations.get(f"{node}@{function}")

    builder = GraphBuilder(functions, merged_op_defs(op_list.op), locate)
    if bundle.kind == "tf1":
        graph_def = p.graph_pb2.GraphDef()
        graph_def.ParseFromString(bundle.graph_def)
        assert bundle.loss_tensor is not None
        node, _, index = bundle.loss_tensor.partition(":")
        loss = TensorRef(node, int(index or 0))
        builder.add_graph(graph_def, "graph", loss)
        top = "graph"
    else:
        assert bundle.top_function is not None
        top = bundle.top_function
        body = builder.add_function(top)
        loss = body.rets[bundle.loss_output]
    top_body = builder.bodies[top]
    variables = []
    for record in bundle.variables:
        source = None
        if record.arg_index is not None and record.arg_index < len(top_body.args):
            source = TensorRef(top_body.args[record.arg_index], 0)
        elif record.node is not None and record.node in top_body.nodes:
            source = TensorRef(record.node, 0)
        variables.append(
            Variable(
                name=record.name,
                trainable=record.trainable,
                dtype=record.dtype,
                shape=record.shape,
                source=source,
                path=record.path,
                location=record.location,
            )
        )
    program = Program(
        bodies=builder.bodies,
        top=top,
        loss=loss,
        variables=variables,
        custom_gradients=dict(bundle.custom_gradients),
        notes=list(bundle.notes) + builder.notes,
        loss_shape=bundle.loss_shape,
    )
    validate_loss(program, bundle.loss_name, sum_loss=sum_loss)
    return program
