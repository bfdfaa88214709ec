"""What each custom gradient saved in a SavedModel returns per input: None, zero or a gradient."""

from __future__ import annotations

from typing import Any

from gradcheck_cli.graph.model import CustomGradient
from gradcheck_cli.protos.graph_builder import GraphBuilder
from gradcheck_cli.protos.tf_protos import node_defs


def saved_custom_gradients(
    meta_graph: Any, builder: GraphBuilder
) -> dict[str, tuple[CustomGradient, ...]]:
    """Per custom-gradient op type, what its saved gradient function returns for each input."""
    library = meta_graph.graph_def.library
    functions = {f.signature.name: f for f in library.function}
    object_graph = meta_graph.object_graph_def
    verdicts: dict[str, tuple[CustomGradient, ...]] = {}
    # Many registrations may share one gradient function: index its nodes once.
    indexed: dict[str, dict[str, Any]] = {}

    def nodes_of(fdef: Any) -> dict[str, Any]:
        name = fdef.signature.name
        if name not in indexed:
            indexed[name] = {n.name: n for n in node_defs(fdef)}
        return indexed[name]

    for registered in library.registered_gradients:
        gradient = functions.get(registered.gradient_func)
        saved = object_graph.concrete_functions.get(registered.gradient_func)
        if gradient is None or saved is None:
            builder.notes.append(
                f"the gradient function of {registered.registered_op_type} is not saved; "
                "its inputs are assumed to receive gradient"
            )
            continue
        structure = saved.output_signature
        kind = structure.WhichOneof("kind")
        values = (
            list(getattr(structure, kind).values)
            if kind in ("list_value", "tuple_value")
            else [structure]
        )
        rets = iter(gradient.signature.output_arg)
        positions = []
        for value in values:
            if value.WhichOneof("kind") == "none_value":
                positions.append(CustomGradient.NONE)
                continue
            ret = next(rets, None)
            zero = ret is not None and _is_zero_ret(nodes_of(gradient), gradient.ret[ret.name])
            positions.append(CustomGradient.ZERO if zero else CustomGradient.FLOWS)
        verdicts[registered.registered_op_type] = tuple(positions)
    return verdicts


def _is_zero_ret(nodes: dict[str, Any], ref: str) -> bool:
    """Whether a gradient function's output is structurally zero (zeros_like, a zero constant)."""
    for _ in range(64):  # follow Identity chains
        node = nodes.get(ref.split(":")[0])
        if node is None:
            return False
        if node.op == "ZerosLike":
            return True
        if node.op == "Const":
            return _zero_constant(node.attr["value"].tensor)
        if node.op == "Fill" and len(node.input) > 1:
            value = nodes.get(node.input[1].split(":")[0])
            return (
                value is not None
                and value.op == "Const"
                and _zero_constant(value.attr["value"].tensor)
            )
        if node.op not in ("Identity", "IdentityN") or not node.input:
            return False
        ref = node.input[0]
    return False


def _zero_constant(tensor: Any) -> bool:
    for field in ("float_val", "double_val", "half_val", "int_val", "int64_val"):
        values = getattr(tensor, field)
        if len(values):
            return all(v == 0 for v in values)
    if tensor.tensor_content:
        return not any(tensor.tensor_content)
    return False
