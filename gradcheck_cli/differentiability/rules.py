"""Whether gradient flows from a node's outputs back into one of its inputs, and if not, why."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gradcheck_cli.differentiability.function_ops import is_dataset_op, runs_its_functions
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.registry import GradientRegistry, load_registry
from gradcheck_cli.differentiability.structural_zeros import (
    PRODUCTS,
    ZERO_RULE_OPS,
    Surroundings,
    zero_cut,
)
from gradcheck_cli.graph.model import ARG_OP, CustomGradient, Node, is_trainable_dtype


@dataclass(frozen=True)
class Cut:
    """Gradient does not cross an edge into a node."""

    reason: Reason
    message: str
    # The input was already a non-float tensor: the real cut is upstream, where it became one.
    inherited: bool = False
    # The node's value does not depend on the input either (a product with a constant zero, a
    # tf.where branch never selected, rows no reader takes): the input changes nothing after
    # it, neither a gradient nor the loss's value.
    value_unused: bool = False


STOP_GRADIENT_OPS = frozenset({"StopGradient", "PreventGradient"})

ASSIGN_OPS = frozenset(
    {
        "Assign",
        "AssignAdd",
        "AssignSub",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
    }
)
# The stateful scatter updates (`ScatterNdNonAliasingAdd` and `TensorScatter*` are functional
# and have real gradients, so they do not match).
_SCATTER_UPDATE = re.compile(r"(Resource)?Scatter(Nd)?(Update|Add|Sub|Mul|Div|Min|Max)")

# Ops whose output depends only on the shape of their input. Each one only counts while the
# registry lists it as not differentiable, so a TensorFlow that starts differentiating one
# falls through to the registry rules instead of being second-guessed here.
SHAPE_OPS = frozenset(
    {
        "Shape",
        "ShapeN",
        "Size",
        "Rank",
        "VariableShape",
        "TensorListElementShape",
        "TensorListLength",
        "TensorArraySize",
        "TensorArraySizeV2",
        "TensorArraySizeV3",
        "ZerosLike",
        "OnesLike",
    }
)

# `_BaseFusedBatchNormGrad` returns None for the mean and variance inputs, in training and in
# inference alike (the scan also finds this; the hand rule gives it a plain-words message).
FUSED_BATCH_NORM_OPS = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})
_FUSED_BATCH_NORM_STATISTICS = {3: "mean", 4: "variance"}


def is_assign_op(op_type: str) -> bool:
    return op_type in ASSIGN_OPS or _SCATTER_UPDATE.fullmatch(op_type) is not None


def input_cut(
    node: Node,
    input_index: int,
    input_dtype: str | None,
    custom_gradients: Mapping[str, tuple[CustomGradient, ...]],
    around: Surroundings | None = None,
) -> Cut | None:
    """Why gradient from `node`'s outputs does not reach input `input_index`; None if it does.

    `around`: `node`'s body around it, to read the constants among its inputs and readers.
    """
    if node.gradient_op_type is None and only_dtypes_decide(node.op_type):
        return _dtype_cut(node, input_dtype)
    return rules_cut(node, input_index, input_dtype, custom_gradients, around)


STOP_GRADIENT_OPS = frozenset({"StopGradient", "PreventGradient"})
"""The op types whose cut is a stop_gradient (`Reason.STOP_GRADIENT`); an op with a gradient
override may be one too, as the op type it names."""


def rules_cut(
    node: Node,
    input_index: int,
    input_dtype: str | None,
    custom_gradients: Mapping[str, tuple[CustomGradient, ...]],
    around: Surroundings | None = None,
) -> Cut | None:
    """`input_cut` by every rule in turn, without the short way for plain op types."""
    registry = load_registry()
    op = node.op_type

    if op == "StopGradient":
        return Cut(Reason.STOP_GRADIENT, "stop_gradient hides its input from the gradient")
    if op == "PreventGradient":
        return Cut(
            Reason.STOP_GRADIENT,
            "PreventGradient forbids a gradient through it: tf.gradients raises LookupError on it",
        )
    if is_assign_op(op):
        return Cut(
            Reason.ASSIGN, f"{op} assigns its value to a variable; assignment has no gradient"
        )
    if op in SHAPE_OPS and op in registry.not_differentiable:
        return Cut(Reason.INDEX_OR_SHAPE_INPUT, f"{op} uses only the shape of its input")

    if node.gradient_op_type is not None:
        if node.gradient_op_type not in custom_gradients and registry.has_entry(
            node.gradient_op_type
        ):
            # A gradient_override_map entry read from protos: TensorFlow looks the gradient up
            # under that name exactly as it would for an op of that type.
            overridden = replace(node, op_type=node.gradient_op_type, gradient_op_type=None)
            return input_cut(overridden, input_index, input_dtype, custom_gradients)
        verdicts = custom_gradients.get(node.gradient_op_type, ())
        # A missing entry is assumed to flow; the loader records a note for it.
        verdict = verdicts[input_index] if input_index < len(verdicts) else CustomGradient.FLOWS
        if verdict is CustomGradient.NONE:
            return Cut(
                Reason.CUSTOM_GRADIENT_NONE,
                f"the custom gradient {node.gradient_op_type} returns None for input {input_index}",
            )
        if verdict is CustomGradient.ZERO:
            return Cut(
                Reason.ZERO_GRADIENT,
                f"the custom gradient {node.gradient_op_type} returns a constant (zero) gradient "
                f"for input {input_index}",
            )
        return _dtype_cut(node, input_dtype)

    # Arguments and function calls are summarised by the analysis, never judged by op type.
    if op != ARG_OP and not runs_its_functions(node):
        cut = _registry_cut(node, input_index, input_dtype, registry)
        if cut is not None:
            return cut
        zero = zero_cut(node, input_index, around or Surroundings({}))
        if zero is not None and is_trainable_dtype(input_dtype):
            return Cut(*zero, value_unused=True)
    return _dtype_cut(node, input_dtype)


def passes_trainable_inputs(node: Node) -> bool:
    """True if `input_cut` passes gradient to every input of `node` whose dtype can carry
    gradient: an op only the dtype rule judges (`only_dtypes_decide`) with an output that can
    carry gradient. The walks' short way for most nodes of a graph."""
    return (
        node.gradient_op_type is None
        and only_dtypes_decide(node.op_type)
        and _has_trainable_output(node)
    )


def passes_unless_a_factor_is_zero(node: Node) -> bool:
    """`passes_trainable_inputs` for a product: true unless one of its factors is zero by
    construction (`structural_zeros.a_factor_may_be_zero` tells, on the arrays)."""
    return (
        node.gradient_op_type is None
        and node.op_type in PRODUCTS
        and _only_dtypes_and_zeros_decide(node.op_type)
        and _has_trainable_output(node)
    )


@functools.cache
def only_dtypes_decide(op: str) -> bool:
    """True for an op type whose inputs only the dtype rule can cut (most ops: MatMul, Tanh,
    AddV2...): no other rule of `rules_cut` applies to any node of it without a custom
    gradient. Asked for every node of a graph: decided once per op type."""
    return _only_dtypes_and_zeros_decide(op) and op not in ZERO_RULE_OPS


@functools.cache
def _only_dtypes_and_zeros_decide(op: str) -> bool:
    """True for an op type whose inputs only the dtype rule and the structural-zero rules can
    cut."""
    registry = load_registry()
    return (
        op not in ("StopGradient", "PreventGradient", "Sign", ARG_OP)
        and not is_assign_op(op)
        and op not in SHAPE_OPS
        and op not in registry.not_differentiable
        and op not in registry.all_none
        and op not in FUSED_BATCH_NORM_OPS
        and not registry.none_inputs.get(op)
        and registry.has_entry(op)
    )


def _registry_cut(
    node: Node, input_index: int, input_dtype: str | None, registry: GradientRegistry
) -> Cut | None:
    op = node.op_type
    if is_dataset_op(op) and (op in registry.not_differentiable or not registry.has_entry(op)):
        return Cut(
            Reason.NON_DIFFERENTIABLE_OP,
            f"{op} is a tf.data op: the dataset runs its functions where TensorFlow takes no "
            "gradient",
        )
    if op in registry.not_differentiable or op in registry.all_none:
        return Cut(Reason.NON_DIFFERENTIABLE_OP, f"{op} has no gradient")
    # `_SignGrad` returns zeros_like(x): a gradient that exists but can never train anything.
    if op == "Sign":
        return Cut(Reason.ZERO_GRADIENT, "the gradient of Sign is zero everywhere")
    if op in FUSED_BATCH_NORM_OPS and input_index in _FUSED_BATCH_NORM_STATISTICS:
        statistic = _FUSED_BATCH_NORM_STATISTICS[input_index]
        return Cut(Reason.OTHER, f"{op} gives no gradient to its {statistic} input")
    if input_index in registry.none_inputs.get(op, ()):
        if not is_trainable_dtype(input_dtype):
            return Cut(
                Reason.INDEX_OR_SHAPE_INPUT,
                f"{op} gives no gradient to its {_dtype_name(str(input_dtype))} input "
                f"{input_index} (an index, shape or condition)",
            )
        return Cut(Reason.OTHER, f"{op} gives no gradient to input {input_index}")
    # TensorFlow only looks a gradient up for ops that receive one, i.e. that have a trainable
    # output; an op with only integer outputs is cut by the dtype rule instead of raising.
    if not registry.has_entry(op) and _has_trainable_output(node):
        return Cut(
            Reason.OTHER,
            f"{op} has no registered gradient: tf.gradients raises LookupError on it",
        )
    return None


def _has_trainable_output(node: Node) -> bool:
    return not node.output_dtypes or any(is_trainable_dtype(d) for d in node.output_dtypes)


def _dtype_cut(node: Node, input_dtype: str | None) -> Cut | None:
    """TensorFlow's backprop_util.IsTrainable gate on the input and on the outputs."""
    if not is_trainable_dtype(input_dtype):
        kind = _dtype_kind(input_dtype)
        return Cut(Reason.INTEGER_DTYPE, f"{kind} tensors carry no gradient", inherited=True)
    if _has_trainable_output(node):
        return None
    if node.op_type == "Cast" and isinstance(node.attrs.get("DstT"), str):
        target = _dtype_name(str(node.attrs["DstT"]))
        kind = _dtype_kind(target)
        return Cut(
            Reason.INTEGER_DTYPE,
            f"the Cast to {target} produces {_article(kind)} {kind} tensor; "
            f"{kind} tensors carry no gradient",
        )
    produced = ", ".join(sorted({_dtype_name(str(d)) for d in node.output_dtypes}))
    kinds = sorted({_dtype_kind(_dtype_name(str(d))) for d in node.output_dtypes})
    return Cut(
        Reason.INTEGER_DTYPE,
        f"{node.op_type} produces only {produced} tensors; "
        f"{' and '.join(kinds)} tensors carry no gradient",
    )


def output_dtype_cut(node: Node, outputs: Sequence[int]) -> Cut:
    """The cut of an input whose gradient comes from some of `node`'s outputs, where only
    `outputs`, none of which can carry gradient, lead on (the indices of a top_k, which
    tf.argsort returns): the value becomes a non-float here."""
    dtypes = [_dtype_name(str(node.output_dtypes[k])) for k in outputs]
    named = " and ".join(f"{dtype} output {k}" for dtype, k in zip(dtypes, outputs))
    kinds = " and ".join(sorted({_dtype_kind(dtype) for dtype in dtypes}))
    verb = "leads" if len(outputs) == 1 else "lead"
    return Cut(
        Reason.INTEGER_DTYPE,
        f"only {node.op_type}'s {named} {verb} on to the loss; {kinds} tensors carry no gradient",
    )


def _dtype_name(dtype: str) -> str:
    # Attributes read straight from a proto may spell the enum ("DT_INT32").
    name = dtype.removeprefix("DT_").lower()
    return name.removesuffix("_ref")


def _dtype_kind(dtype: str | None) -> str:
    """The word for a dtype in messages: integer for every int/uint/qint, else its name."""
    name = _dtype_name(dtype or "unknown")
    if re.fullmatch(r"q?u?int\d+", name):
        return "integer"
    return name


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
