"""Build the graph model from a traced result (the worker's, or an in-process trace)."""

from __future__ import annotations

from dataclasses import replace

from gradcheck_cli.graph.model import TF1_TOP, GraphKind, Program, SourceLocation, TensorRef
from gradcheck_cli.loss.checks import validate_loss
from gradcheck_cli.protos.descriptors import messages
from gradcheck_cli.protos.graph_builder import GraphBuilder
from gradcheck_cli.protos.op_defs import merged_op_defs
from gradcheck_cli.worker.protocol import Traced, TracedGraph


def program_from_traced(traced: Traced, *, sum_loss: bool = False) -> Program:
    # The classes that keep NodeDefs serialized: most nodes are of a kind met before, found by
    # their bytes without a parse (see `GraphBuilder`).
    m = messages()
    library = m.FunctionDefLibrary.FromString(traced.library)
    op_list = m.OpList.FromString(traced.op_defs)
    functions = {f.signature.name: f for f in library.function}
    locations = traced.locations

    def locate(node: str, function: str) -> SourceLocation | None:
        return locations.get(f"{node}@{function}")

    shapes = traced.output_shapes

    def shape(node: str, function: str) -> tuple[tuple[int | None, ...] | None, ...]:
        return shapes.get(f"{node}@{function}", ())

    builder = GraphBuilder(functions, merged_op_defs(op_list.op), locate, shapes=shape)
    if isinstance(traced, TracedGraph):
        graph_def = m.GraphDef.FromString(traced.graph_def)
        node, _, index = traced.loss_tensor.partition(":")
        loss = TensorRef(node, int(index or 0))
        builder.add_graph(graph_def, TF1_TOP, loss)
        top, kind = TF1_TOP, GraphKind.TF1_GRAPH
    else:
        top, kind = traced.top_function, GraphKind.FUNCTION
        body = builder.add_function(top)
        loss = body.rets[traced.loss_output]
    top_body = builder.bodies[top]
    variables = []
    for record in traced.variables:
        source = None
        if record.arg_index is not None and record.arg_index < len(top_body.args):
            source = TensorRef(top_body.args[record.arg_index], 0)
        elif record.node is not None and record.node in top_body.nodes:
            source = TensorRef(record.node, 0)
        variables.append(replace(record.variable, source=source))
    program = Program(
        bodies=builder.bodies,
        top=top,
        loss=loss,
        variables=variables,
        custom_gradients=dict(traced.custom_gradients),
        notes=[*traced.notes, *builder.notes],
        loss_shape=traced.loss_shape,
        kind=kind,
    )
    validate_loss(program, traced.loss_name, sum_loss=sum_loss)
    return program
