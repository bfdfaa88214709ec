"""How an argmax on a variable's path is used (a value or an index), and the fix for each."""

from __future__ import annotations

import ast

from gradcheck_cli.analysis.verdicts import PathStep, VariableVerdict
from gradcheck_cli.findings.advice.transform_source import SOFT_ARGMAX, Rewrite
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.op_expressions import called_name, statement_at

# Ops that take an argmax's result as an index (or a label), not as a number.
_INDEX_USES = frozenset(
    {
        "Gather",
        "GatherV2",
        "ResourceGather",
        "GatherNd",
        "ResourceGatherNd",
        "OneHot",
        "SparseSoftmaxCrossEntropyWithLogits",
        "StridedSlice",
        "Slice",
        "ScatterNd",
        "TensorScatterUpdate",
        "UnsortedSegmentSum",
        "EmbeddingLookup",
    }
)
_COMPARISONS = frozenset({"Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual"})
_PASSING = frozenset({"Identity", "Reshape", "ExpandDims", "Squeeze"})
_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})


def selection_use(verdict: VariableVerdict, source: SourceLines) -> Rewrite | str:
    """A soft-argmax rewrite when the argmax's value is cast to a float and used as a number,
    else what to do in words."""
    route = verdict.route
    found = [i for i, step in enumerate(route) if step.op_type in ("ArgMax", "ArgMin")]
    if not found:
        return _UNSURE
    index = found[0]
    use = index + 1
    while use < len(route) and route[use].op_type in _PASSING:
        use += 1
    if use >= len(route):
        return _UNSURE
    step = route[use]
    if step.op_type in _INDEX_USES or (step.op_type == "Cast" and not _to_float(step)):
        return (
            "an index carries no gradient: to train it, let the scores weight the values "
            "instead of picking one (e.g. tf.nn.softmax(scores) @ table in place of "
            "tf.gather(table, tf.argmax(scores))); if picking is intended, set trainable=False"
        )
    if step.op_type in _COMPARISONS:
        return (
            "a count of right or wrong predictions has no gradient: train on a differentiable "
            "loss of the scores themselves (e.g. tf.nn.sparse_softmax_cross_entropy_with_logits "
            "for class labels) and keep the argmax for the metric"
        )
    if step.op_type == "Cast" and _to_float(step):
        rewrite = _soft_argmax(route[index], step, source)
        if rewrite is not None:
            return rewrite
    return _UNSURE


_UNSURE = (
    "an argmax has no gradient: compute the result from the scores with a softmax (a soft-argmax "
    "where the index is used as a number, softmax weights where it picks values)"
)


def _to_float(step: PathStep) -> bool:
    node = step.node
    return node is not None and bool(node.output_dtypes) and node.output_dtypes[0] in _FLOATS


def _soft_argmax(argmax: PathStep, cast: PathStep, source: SourceLines) -> Rewrite | None:
    """`tf.cast(tf.argmax(scores, axis=-1), tf.float32)` written as a soft index, when that is
    the source's one cast of an argmax over the last axis."""
    location = cast.location
    if location is None or cast.node is None or argmax.node is None:
        return None
    tree = source.tree(location.file)
    statement = statement_at(tree, location.line) if tree is not None else None
    if statement is None:
        return None
    found = [
        node
        for node in ast.walk(statement)
        if isinstance(node, ast.Call)
        and called_name(node.func) == "cast"
        and node.args
        and isinstance(node.args[0], ast.Call)
        and called_name(node.args[0].func) in ("argmax", "argmin")
    ]
    if len(found) != 1:
        return None
    selection = found[0].args[0]
    if not selection.args or not _last_axis(selection, argmax):
        return None
    scores = source.segment(location.file, selection.args[0])
    original = source.segment(location.file, found[0])
    if scores is None or original is None or "\n" in scores:
        return None
    sign = "-" if called_name(selection.func) == "argmin" else ""
    dtype = cast.node.output_dtypes[0]
    replacement = (
        f"tf.reduce_sum(tf.nn.softmax({sign}{scores}) * tf.range(tf.shape({scores})[-1], "
        f"dtype=tf.{dtype}), axis=-1)"
    )
    return Rewrite(
        SourceLocation(location.file, found[0].lineno), original, replacement, SOFT_ARGMAX
    )


def _last_axis(call: ast.Call, argmax: PathStep) -> bool:
    """True if the argmax runs over the scores' last axis (the soft index sums over it)."""
    axis: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg in ("axis", "dimension"):
            axis = keyword.value
    if axis is None:
        return False
    value = ast.literal_eval(axis) if isinstance(axis, (ast.Constant, ast.UnaryOp)) else None
    if value == -1:
        return True
    node = argmax.node
    shape = node.output_shapes[0] if node is not None and node.output_shapes else None
    return isinstance(value, int) and shape is not None and value == len(shape)
