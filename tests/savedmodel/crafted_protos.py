"""Hand-crafted hostile saved_model.pb files: each mutates a tiny real SavedModel's loss."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FLOAT = 1  # DT_FLOAT

Mutation = Callable[[Any, Any], None]
"""(the loss FunctionDef, the MetaGraphDef) -> None, mutating them in place."""


def _node(function: Any, op: str, inputs: list[str], name: str = "crafted") -> Any:
    node = function.node_def.add()
    node.name = name
    node.op = op
    node.input.extend(inputs)
    return node


def _returned(function: Any, ref: str) -> None:
    function.ret[function.signature.output_arg[0].name] = ref


def _first_input(function: Any) -> str:
    return function.signature.input_arg[0].name


def unpack_num(num: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        node = _node(function, "Unpack", [_first_input(function)])
        node.attr["num"].i = num
        node.attr["T"].type = FLOAT
        _returned(function, "crafted:output:0")

    return mutate


def split_num(op: str, num_split: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        x = _first_input(function)
        inputs = [x, x, x] if op == "SplitV" else [x, x]
        node = _node(function, op, inputs)
        node.attr["num_split"].i = num_split
        node.attr["T"].type = FLOAT
        _returned(function, "crafted:output:0")

    return mutate


def identity_n(width: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        node = _node(function, "IdentityN", [_first_input(function)] * width)
        node.attr["T"].list.type.extend([FLOAT] * width)
        _returned(function, "crafted:output:0")

    return mutate


def call_with_tout(width: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        node = _node(function, "PartitionedCall", [_first_input(function)])
        node.attr["f"].func.name = function.signature.name
        node.attr["Tin"].list.type.append(FLOAT)
        node.attr["Tout"].list.type.extend([FLOAT] * width)

    return mutate


def while_loop(width: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        node = _node(function, "While", [_first_input(function)] * width)
        node.attr["T"].list.type.extend([FLOAT] * width)
        node.attr["body"].func.name = "missing_body"
        node.attr["cond"].func.name = "missing_cond"
        _returned(function, "crafted:output:0")

    return mutate


def cast_to_dtype(dtype: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        node = _node(function, "Cast", [_first_input(function)])
        node.attr["SrcT"].type = FLOAT
        node.attr["DstT"].type = dtype
        _returned(function, "crafted:y:0")

    return mutate


def argument_dtype(dtype: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        function.signature.input_arg[0].type = dtype

    return mutate


def number_attr_of_wrong_kind(function: Any, meta_graph: Any) -> None:
    node = _node(function, "Unpack", [_first_input(function)])
    node.attr["num"].type = FLOAT
    node.attr["T"].type = FLOAT


def output_index_read(index: int) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        node = _node(function, "Identity", [_first_input(function)])
        node.attr["T"].type = FLOAT
        _returned(function, f"crafted:output:{index}")

    return mutate


def variable_shape(dims: list[int]) -> Mutation:
    def mutate(function: Any, meta_graph: Any) -> None:
        for node in meta_graph.object_graph_def.nodes:
            if node.WhichOneof("kind") == "variable":
                del node.variable.shape.dim[:]
                for size in dims:
                    node.variable.shape.dim.add().size = size

    return mutate


def nested_calls(depth: int) -> Mutation:
    """A chain of `depth` functions, each calling the next."""

    def mutate(function: Any, meta_graph: Any) -> None:
        library = meta_graph.graph_def.library
        for level in range(depth):
            nested = library.function.add()
            nested.signature.name = f"nested_{level}"
            nested.signature.input_arg.add(name="a", type=FLOAT)
            nested.signature.output_arg.add(name="o", type=FLOAT)
            nested.ret["o"] = "a"
            if level + 1 < depth:
                call = _node(nested, "PartitionedCall", ["a"], name="c")
                call.attr["f"].func.name = f"nested_{level + 1}"
                call.attr["Tin"].list.type.append(FLOAT)
                call.attr["Tout"].list.type.append(FLOAT)
                nested.ret["o"] = "c:output:0"
        call = _node(function, "PartitionedCall", [_first_input(function)])
        call.attr["f"].func.name = "nested_0"
        call.attr["Tin"].list.type.append(FLOAT)
        call.attr["Tout"].list.type.append(FLOAT)
        _returned(function, "crafted:output:0")

    return mutate
