"""input_cut on hand-built nodes, and against tf.gradients on single real ops."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.differentiability.registry import load_registry
from gradcheck_cli.differentiability.rules import SHAPE_OPS, Cut, input_cut
from gradcheck_cli.graph.model import CustomGradient, Node, TensorRef

F32 = "float32"


def node(
    op_type: str,
    outputs: tuple[str | None, ...] = (F32,),
    *,
    n_inputs: int = 2,
    **fields: Any,
) -> Node:
    inputs = tuple(TensorRef(f"in{i}") for i in range(n_inputs))
    return Node(
        name=op_type.lower(), op_type=op_type, inputs=inputs, output_dtypes=outputs, **fields
    )


def cut(n: Node, index: int = 0, dtype: str | None = F32, custom: Any = None) -> Cut | None:
    return input_cut(n, index, dtype, custom or {})


# --------------------------------------------------------------------------- hand-built nodes


@pytest.mark.parametrize("op_type", ["StopGradient", "PreventGradient"])
def test_stop_gradient(op_type: str) -> None:
    found = cut(node(op_type, n_inputs=1))
    assert found is not None and found.reason is Reason.STOP_GRADIENT and not found.inherited


@pytest.mark.parametrize(
    "op_type",
    [
        "Assign",
        "AssignAdd",
        "AssignVariableOp",
        "AssignSubVariableOp",
        "ScatterNdUpdate",
        "ResourceScatterUpdate",
        "ResourceScatterNdAdd",
        "ScatterMax",
    ],
)
def test_assign_ops(op_type: str) -> None:
    found = cut(node(op_type, outputs=()), 1)
    assert found is not None and found.reason is Reason.ASSIGN


@pytest.mark.parametrize("op_type", ["ScatterNdNonAliasingAdd", "TensorScatterUpdate"])
def test_functional_scatters_are_not_assignments(op_type: str) -> None:
    assert cut(node(op_type, n_inputs=3), 2) is None


def test_shape_ops_come_from_the_registry() -> None:
    assert SHAPE_OPS <= load_registry().not_differentiable
    for op_type in SHAPE_OPS:
        found = cut(node(op_type, outputs=("int32",), n_inputs=1))
        assert found is not None and found.reason is Reason.INDEX_OR_SHAPE_INPUT, op_type


def test_custom_gradient_verdicts() -> None:
    identity_n = node("IdentityN", outputs=(F32,) * 4, n_inputs=4, gradient_op_type="CG-1")
    flows, none, zero = CustomGradient.FLOWS, CustomGradient.NONE, CustomGradient.ZERO
    custom = {"CG-1": (none, flows, zero, flows)}
    none_cut = cut(identity_n, 0, custom=custom)
    zero_cut = cut(identity_n, 2, custom=custom)
    assert none_cut is not None and none_cut.reason is Reason.CUSTOM_GRADIENT_NONE
    assert zero_cut is not None and zero_cut.reason is Reason.ZERO_GRADIENT
    assert cut(identity_n, 1, custom=custom) is None
    # A flowing custom gradient still cannot carry gradient into an integer tensor.
    integer = cut(identity_n, 3, "int32", custom=custom)
    assert integer is not None and integer.reason is Reason.INTEGER_DTYPE and integer.inherited
    # The loader records a note for a missing gradient function; the rule assumes it flows.
    assert cut(identity_n, 0, custom={}) is None


@pytest.mark.parametrize(
    ("op_type", "outputs"),
    [("Equal", ("bool",)), ("OneHot", (F32,)), ("Round", (F32,)), ("ArgMax", ("int64",))],
)
def test_non_differentiable_ops(op_type: str, outputs: tuple[str, ...]) -> None:
    found = cut(node(op_type, outputs))
    assert found is not None and found.reason is Reason.NON_DIFFERENTIABLE_OP
    assert op_type in found.message


def test_bitwise_xor_is_its_own_cut_even_on_integers() -> None:
    found = cut(node("BitwiseXor", ("int32",)), 0, "int32")
    assert found is not None
    assert found.reason is Reason.NON_DIFFERENTIABLE_OP and not found.inherited


def test_sign_has_a_zero_gradient() -> None:
    found = cut(node("Sign", n_inputs=1))
    assert found is not None and found.reason is Reason.ZERO_GRADIENT


def test_fused_batch_norm_statistics() -> None:
    batch_norm = node("FusedBatchNormV3", outputs=(F32,) * 6, n_inputs=5)
    assert [cut(batch_norm, i) is None for i in range(5)] == [True, True, True, False, False]
    found = cut(batch_norm, 3)
    assert found is not None and found.reason is Reason.OTHER and "mean" in found.message


def test_none_inputs_by_dtype() -> None:
    indices = cut(node("GatherV2", n_inputs=3), 1, "int32")
    assert indices is not None and indices.reason is Reason.INDEX_OR_SHAPE_INPUT
    assert not indices.inherited
    assert cut(node("GatherV2", n_inputs=3), 0) is None
    # Betainc's gradient function returns None for its float `a` and `b` inputs.
    betainc = cut(node("Betainc", n_inputs=3), 0)
    assert betainc is not None and betainc.reason is Reason.OTHER and "Betainc" in betainc.message
    assert cut(node("Betainc", n_inputs=3), 2) is None


def test_op_without_registry_entry() -> None:
    found = cut(node("Unique", outputs=(F32, "int32"), n_inputs=1))
    assert found is not None and found.reason is Reason.OTHER and "LookupError" in found.message
    # With only integer outputs TensorFlow never asks for the gradient: the dtype rule decides.
    bucketize = cut(node("Bucketize", outputs=("int32",), n_inputs=1))
    assert bucketize is not None and bucketize.reason is Reason.INTEGER_DTYPE
    assert not bucketize.inherited


def test_calls_and_args_are_not_judged_by_op_type() -> None:
    call = node("StatefulPartitionedCall", calls={"f": ("fn",)})
    assert cut(call) is None
    assert cut(node("_Arg", n_inputs=0)) is None
    direct = node("my_library_function", calls={"f": ("my_library_function",)})
    assert cut(direct) is None


def test_dtype_rule() -> None:
    inherited = cut(node("MatMul"), 0, "int32")
    assert inherited is not None and inherited.reason is Reason.INTEGER_DTYPE
    assert inherited.inherited
    to_int = cut(node("Cast", ("int32",), n_inputs=1, attrs={"DstT": "int32"}))
    assert to_int is not None and to_int.reason is Reason.INTEGER_DTYPE
    assert not to_int.inherited and "int32" in to_int.message
    assert cut(node("Cast", ("float16",), n_inputs=1, attrs={"DstT": "float16"})) is None
    for dtype in ("resource", "variant", "float32_ref", "bfloat16", "complex64", None):
        assert cut(node("Identity", n_inputs=1), 0, dtype) is None, dtype
    ref = cut(node("Identity", ("int32_ref",), n_inputs=1), 0, "int32_ref")
    assert ref is not None and ref.inherited
    # Unknown output dtypes get the benefit of the doubt.
    assert cut(node("Identity", (None,), n_inputs=1)) is None


def test_rules_do_not_import_tensorflow() -> None:
    program = (
        "import sys\n"
        "from gradcheck_cli.differentiability.rules import input_cut\n"
        "from gradcheck_cli.differentiability.registry import load_registry\n"
        "load_registry()\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
    )
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr


# --------------------------------------------------------------------------- TensorFlow oracle

# Each builder receives `var(*shape)` (a fresh float32 variable, read) and returns one output
# of the op under test; the loss sums that output.
Builder = Callable[[Callable[..., Any]], Any]


def _oracle_cases() -> dict[str, Builder]:
    import tensorflow as tf

    raw = tf.raw_ops
    return {
        "StopGradient": lambda var: tf.stop_gradient(var(2, 3)),
        "PreventGradient": lambda var: raw.PreventGradient(input=var(3)),
        "Cast f32->int32": lambda var: tf.cast(var(3), tf.int32),
        "Cast f32->bool": lambda var: tf.cast(var(3), tf.bool),
        "Cast f32->f16": lambda var: tf.cast(var(3), tf.float16),
        "ArgMax": lambda var: tf.math.argmax(var(2, 3), axis=1),
        "Round": lambda var: tf.round(var(3)),
        "Floor": lambda var: tf.floor(var(3)),
        "FloorDiv": lambda var: tf.math.floordiv(var(3), var(3)),
        "Sign": lambda var: tf.sign(var(3)),
        "GatherV2": lambda var: tf.gather(var(4, 3), tf.constant([0, 2]), axis=0),
        "GatherV2 cast indices": lambda var: tf.gather(var(4, 3), tf.cast(var(2), tf.int32)),
        "Reshape": lambda var: tf.reshape(var(2, 3), tf.constant([3, 2])),
        "BitwiseXor": lambda var: tf.bitwise.bitwise_xor(
            tf.cast(var(3), tf.int32), tf.cast(var(3), tf.int32)
        ),
        "Equal": lambda var: tf.equal(var(3), var(3)),
        "Less": lambda var: tf.less(var(3), var(3)),
        "Shape": lambda var: raw.Shape(input=var(2, 3)),
        "Size": lambda var: raw.Size(input=var(2, 3)),
        "ZerosLike": lambda var: raw.ZerosLike(x=var(3)),
        "Relu": lambda var: tf.nn.relu(var(2, 3)),
        "MatMul": lambda var: tf.matmul(var(2, 3), var(3, 2)),
        "Maximum": lambda var: tf.maximum(var(3), var(3)),
        "Sum axis": lambda var: tf.reduce_sum(var(2, 3), axis=tf.constant(1)),
        "Cumsum": lambda var: tf.math.cumsum(var(3), axis=tf.constant(0)),
        "FusedBatchNormV3 inference": lambda var: raw.FusedBatchNormV3(
            x=var(1, 2, 2, 3),
            scale=var(3),
            offset=var(3),
            mean=var(3),
            variance=var(3),
            is_training=False,
        )[0],
        "FusedBatchNormV3 training": lambda var: raw.FusedBatchNormV3(
            x=var(1, 2, 2, 3),
            scale=var(3),
            offset=var(3),
            mean=var(0),
            variance=var(0),
            is_training=True,
        )[0],
        "OneHot": lambda var: tf.one_hot(tf.constant([0, 2]), 3, on_value=var(), off_value=var()),
        "Select": lambda var: raw.Select(condition=var(3) > 0, x=var(3), y=var(3)),
        "SelectV2": lambda var: tf.where(var(3) > 0, var(3), var(3)),
        "TopKV2": lambda var: tf.math.top_k(var(5), k=2).values,
        "Fill": lambda var: tf.fill(tf.constant([2, 2]), var()),
        "Betainc": lambda var: tf.math.betainc(var(3), var(3), var(3)),
        "Bucketize": lambda var: raw.Bucketize(input=var(3), boundaries=[0.0, 1.0]),
        "Unique": lambda var: tf.unique(var(3)).y,
        "Complex": lambda var: tf.complex(var(3), var(3)),
    }


def _node_of(op: Any) -> Node:
    """The graph-model node for a traced op, as a loader would build it."""
    attrs: dict[str, object] = {}
    if op.type == "Cast":
        attrs["DstT"] = op.get_attr("DstT").name
    return Node(
        name=op.name,
        op_type=op.type,
        inputs=tuple(TensorRef(t.op.name, t.value_index) for t in op.inputs),
        output_dtypes=tuple(t.dtype.name for t in op.outputs),
        attrs=attrs,
    )


def _tensorflow_cuts(tf: Any, loss: Any, op: Any) -> list[bool]:
    """Per input of `op`: True if tf.gradients gives None, a structural zero, or raises."""
    cuts: list[bool] = []
    for tensor in op.inputs:
        try:
            (gradient,) = tf.gradients(loss, [tensor])
        except LookupError:  # no registered gradient, or PreventGradient
            cuts.append(True)
            continue
        if gradient is None:
            cuts.append(True)
            continue
        # Sign's gradient is zeros_like(x), which graph mode folds into a Const.
        value = tf.get_static_value(gradient) if isinstance(gradient, tf.Tensor) else None
        cuts.append(value is not None and not value.any())
    return cuts


def _trace(tf: Any, build: Builder) -> tuple[Any, Any]:
    """The FuncGraph of `sum(build(...))` and the op under test inside it."""
    variables: list[Any] = []
    captured: dict[str, Any] = {}
    used = 0

    def var(*shape: int) -> Any:
        nonlocal used
        # Created outside the trace, as a model's variables are, and only on the first trace
        # (tf.function traces twice when the first trace creates variables). The values do
        # not matter to a structural None.
        if used == len(variables):
            with tf.init_scope():
                variables.append(tf.Variable(tf.fill(shape, 0.5)))
        used += 1
        return tf.convert_to_tensor(variables[used - 1])

    def loss_fn() -> Any:
        nonlocal used
        used = 0
        out = build(var)
        captured["op"] = out.op
        scalar = tf.abs(out) if out.dtype.is_complex else tf.cast(out, tf.float32)
        return tf.reduce_sum(scalar)

    graph = tf.function(loss_fn, autograph=False).get_concrete_function().graph
    return graph, captured["op"]


def test_rules_agree_with_tf_gradients() -> None:
    import tensorflow as tf

    disagreements: list[str] = []
    for name, build in _oracle_cases().items():
        graph, op = _trace(tf, build)
        with graph.as_default():
            from_tensorflow = _tensorflow_cuts(tf, graph.outputs[0], op)
        target = _node_of(op)
        from_rules = [
            input_cut(target, i, tensor.dtype.name, {}) is not None
            for i, tensor in enumerate(op.inputs)
        ]
        if from_rules != from_tensorflow:
            disagreements.append(
                f"{name} ({op.type}): rules {from_rules}, tf.gradients {from_tensorflow}"
            )
    assert disagreements == []


# --------------------------------------------------------------------------- the short way


def test_the_short_way_for_plain_op_types_agrees_with_every_rule() -> None:
    # input_cut skips the rules for op types that only the dtype rule can cut; on every op
    # type TensorFlow knows (and a few it does not), in every dtype, next to zero constants,
    # the full rules must say the same.
    from gradcheck_cli.differentiability.rules import only_dtypes_decide, rules_cut
    from gradcheck_cli.differentiability.structural_zeros import Surroundings
    from gradcheck_cli.graph.model import CONSTANT_ATTR, Constant

    registry = load_registry()
    zero = Node("zero", "Const", output_dtypes=(F32,), attrs={CONSTANT_ATTR: Constant((), (0,))})
    around = Surroundings(producers={"in0": zero, "in1": zero, "in2": zero})
    op_types = sorted(
        registry.registered | registry.not_differentiable | registry.all_none | {"NoSuchOp"}
    )
    plain = [op for op in op_types if only_dtypes_decide(op)]
    assert {"MatMul", "Tanh", "AddV2", "Conv2D"} <= set(plain)
    assert not {"StopGradient", "Mul", "ArgMax", "Pack", "NoSuchOp"} & set(plain)
    for op in plain:
        for outputs in ((F32,), ("int32",), (F32, "int32"), ()):
            for dtype in (F32, "int32", "resource", None):
                built = Node(
                    "n",
                    op,
                    inputs=(TensorRef("in0"), TensorRef("in1"), TensorRef("in2")),
                    output_dtypes=outputs,
                    attrs={"axis": 0},
                )
                for index in range(3):
                    assert input_cut(built, index, dtype, {}, around) == rules_cut(
                        built, index, dtype, {}, around
                    ), (op, outputs, dtype, index)
