"""A hard threshold made soft: a comparison cast to a float becomes the sigmoid of the
distance between its sides, written on the user's own expression."""

from __future__ import annotations

import ast

from gradcheck_cli.analysis.verdicts import VariableVerdict
from gradcheck_cli.findings.advice.transform_source import (
    SOFT_THRESHOLD,
    Rewrite,
    expression_at,
)
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.op_expressions import called_name

# Each comparison op, and whether its left side is the larger one when it holds.
_LEFT_LARGER = {"Greater": True, "GreaterEqual": True, "Less": False, "LessEqual": False}
THRESHOLDS = frozenset(_LEFT_LARGER)
# The sigmoid's temperature: the distance at which it is 0.73 instead of 1.
TEMPERATURE = "0.1"
_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
_TIGHT = (ast.Call, ast.Name, ast.Attribute, ast.Subscript, ast.Constant)


def threshold_fix(verdict: VariableVerdict, name: str, source: SourceLines) -> str:
    """The soft threshold, as code on the user's expression when it is sure to fit, else in
    words."""
    found = soft_threshold(verdict, source)
    blocker = verdict.blockers[0]
    where = f" at line {blocker.location.line}" if blocker.location else ""
    if isinstance(found, Rewrite):
        return (
            f"the comparison{where} is a hard threshold: no gradient crosses it. To train "
            f"{name}, use a soft threshold, the sigmoid of the distance (a smaller temperature "
            f"than {TEMPERATURE} sharpens it), in place of {_one_line(found.original)}; keep the "
            f"hard one as a metric:\n    {found.replacement}"
        )
    return (
        f"the comparison{where} is a hard threshold: no gradient crosses it. To train {name}, "
        "use a soft one, the sigmoid of the distance to the threshold "
        f"(tf.sigmoid((a - b) / {TEMPERATURE}) for a > b) where a float of the comparison is "
        f"used, and keep the hard one as a metric ({found})"
    )


def soft_threshold(verdict: VariableVerdict, source: SourceLines) -> Rewrite | str:
    """`tf.sigmoid((a - b) / 0.1)` in place of `tf.cast(a > b, tf.float32)`, or why it cannot
    be written for sure: the one cut is the comparison, cast to the variable's float dtype."""
    if len(verdict.blockers) != 1 or verdict.blockers[0].op_type not in THRESHOLDS:
        return "the variable has cuts other than one comparison"
    blocker = verdict.blockers[0]
    location = blocker.location
    if location is None:
        return "the comparison's source line is not known"
    found = expression_at(source, location, blocker.op_type)
    if found is None:
        return f"the comparison is not found unambiguously on line {location.line}"
    comparison, parent, _ = found
    if not isinstance(comparison, ast.Compare) or not _is_float_cast(parent, comparison, verdict):
        return f"the comparison on line {location.line} is not cast to {verdict.dtype} at once"
    assert isinstance(parent, ast.Call)
    left = source.segment(location.file, comparison.left)
    right = source.segment(location.file, comparison.comparators[0])
    original = source.segment(location.file, parent)
    if left is None or right is None or original is None:
        return f"the source of line {location.line} is not readable"
    larger, smaller = (left, right) if _LEFT_LARGER[blocker.op_type] else (right, left)
    distance = f"{_operand(larger)} - {_operand(smaller, right_of_minus=True)}"
    replacement = f"tf.sigmoid(({distance}) / {TEMPERATURE})"
    return Rewrite(
        SourceLocation(location.file, parent.lineno), original, replacement, SOFT_THRESHOLD
    )


def _one_line(code: str) -> str:
    """A multi-line expression on one line, for a sentence."""
    try:
        return ast.unparse(ast.parse(code.strip(), mode="eval"))
    except SyntaxError:
        return " ".join(code.split())


def _is_float_cast(parent: ast.AST, comparison: ast.Compare, verdict: VariableVerdict) -> bool:
    """True if `parent` is `tf.cast(comparison, <the variable's float dtype>)`."""
    if not isinstance(parent, ast.Call) or called_name(parent.func) != "cast":
        return False
    if not parent.args or parent.args[0] is not comparison or verdict.dtype not in _FLOATS:
        return False
    dtypes = [*parent.args[1:2], *(k.value for k in parent.keywords if k.arg == "dtype")]
    if len(dtypes) != 1:
        return False
    dtype = dtypes[0]
    # `tf.float32`, `float32` or "float32".
    named = dtype.value if isinstance(dtype, ast.Constant) else called_name(dtype)
    return named == verdict.dtype


def _operand(text: str, *, right_of_minus: bool = False) -> str:
    """`text` as an operand of `-`, parenthesized unless it binds tighter."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return f"({text.strip()})"
    tight = isinstance(node, _TIGHT) or (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult))
    )
    if not right_of_minus and isinstance(node, ast.BinOp):
        tight = True
    return text.strip() if tight else f"({text.strip()})"
