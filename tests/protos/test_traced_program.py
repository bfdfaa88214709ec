"""The graph model built from a traced result: its top body, its loss, where variables enter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradcheck_cli.graph.model import ARG_OP, TF1_TOP, GraphKind, TensorRef
from gradcheck_cli.protos.traced_program import program_from_traced
from gradcheck_cli.tracing import traced
from gradcheck_cli.tracing.function_tracing import concrete_function, trace_loss

HERE = Path(__file__)


def test_a_traced_function_enters_its_variables_through_captured_arguments() -> None:
    import tensorflow as tf

    read = tf.Variable(1.0, name="read")
    spare = tf.Variable(2.0, name="spare")

    def loss() -> Any:
        return read * 2.0

    result = trace_loss(concrete_function(loss, "loss", HERE), "loss", [read, spare], verify=False)
    program = program_from_traced(result)
    assert program.kind is GraphKind.FUNCTION and program.top == result.top_function
    by_name = {v.name: v for v in program.variables}
    source = by_name["read"].source
    assert source is not None and program.top_body.nodes[source.node].op_type == ARG_OP
    assert by_name["spare"].source is None
    assert program.loss == program.top_body.rets[result.loss_output]


def test_a_tf1_graph_is_marked_as_one_and_its_variables_are_its_nodes() -> None:
    import tensorflow as tf

    with tf.Graph().as_default() as graph:
        weight = tf.compat.v1.get_variable("weight", shape=[2])
        loss = tf.reduce_sum(weight * 2.0, name="loss")
    program = program_from_traced(traced.traced_graph(graph, loss, "loss"))
    assert program.kind is GraphKind.TF1_GRAPH and program.top == TF1_TOP
    (variable,) = program.variables
    assert variable.name == "weight" and variable.source == TensorRef("weight", 0)
    assert program.loss == TensorRef("loss", 0)


def test_a_loss_of_a_dtype_without_gradient_is_modelled_not_refused() -> None:
    # TensorFlow's gradient of an int32 loss is None for every variable: a verdict, not an
    # input gradcheck cannot analyse.
    import tensorflow as tf

    weight = tf.Variable(1.0, name="weight")

    def loss() -> Any:
        return tf.cast(weight, tf.int32)

    result = trace_loss(concrete_function(loss, "loss", HERE), "loss", [weight], verify=False)
    program = program_from_traced(result)
    assert program.top_body.input_dtype(program.loss) == "int32"
