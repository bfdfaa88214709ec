"""Find, in a Python statement, the expression that created a TensorFlow op of a given type."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.files import python_source

_COMPARISONS: dict[type[ast.cmpop], str] = {
    ast.Gt: "Greater",
    ast.GtE: "GreaterEqual",
    ast.Lt: "Less",
    ast.LtE: "LessEqual",
}
_OPERATORS: dict[type[ast.operator], tuple[str, ...]] = {
    ast.Add: ("AddV2", "Add"),
    ast.Sub: ("Sub",),
    ast.Mult: ("Mul",),
    ast.Div: ("RealDiv", "Div"),
    ast.FloorDiv: ("FloorDiv",),
    ast.Mod: ("FloorMod",),
    ast.Pow: ("Pow",),
    ast.MatMult: ("MatMul", "BatchMatMulV2"),
    ast.BitXor: ("BitwiseXor",),
    ast.BitAnd: ("BitwiseAnd",),
    ast.BitOr: ("BitwiseOr",),
}
# Calls whose op type is not their name run together (`tf.cast` is Cast, `tf.argmax` ArgMax).
_CALLS = {"clip_by_value": ("ClipByValue", "Minimum", "Maximum"), "matmul": ("MatMul",)}


def called_name(func: ast.expr) -> str | None:
    """`quantize` for `quantize(...)` and for `module.quantize(...)`."""
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def creates(node: ast.AST, op_type: str) -> bool:
    """True if evaluating `node` itself (not its operands) creates an op of type `op_type`."""
    base = op_type.removesuffix("V2").removesuffix("V3").lower()
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _COMPARISONS.get(type(node.ops[0])) == op_type
    if isinstance(node, ast.BinOp):
        return op_type in _OPERATORS.get(type(node.op), ())
    if isinstance(node, ast.Call):
        name = called_name(node.func)
        if name is None:
            return False
        return op_type in _CALLS.get(name, ()) or name.replace("_", "").lower() == base
    return False


def statement_at(tree: ast.Module, line: int) -> ast.stmt | None:
    """The innermost simple statement whose lines include `line`."""
    found: ast.stmt | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(node, COMPOUND_STATEMENTS):
            continue
        end = node.end_lineno or node.lineno
        if node.lineno <= line <= end and (found is None or node.lineno >= found.lineno):
            found = node
    return found


def statements_by_line(tree: ast.Module) -> dict[int, ast.stmt]:
    """`statement_at(tree, line)` for every line that has one, in one walk of the tree."""
    found: dict[int, ast.stmt] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(node, COMPOUND_STATEMENTS):
            continue
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            known = found.get(line)
            if known is None or node.lineno >= known.lineno:
                found[line] = node
    return found


COMPOUND_STATEMENTS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Match,
)


def parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _in_branch(statement: ast.stmt, op_type: str, branch: int) -> list[int]:
    """The lines of `op_type` ops in the lambda a tf.cond of `statement` takes for `branch`
    (its second or third argument, or true_fn= / false_fn=)."""
    lines: list[int] = []
    for node in ast.walk(statement):
        if not isinstance(node, ast.Call) or called_name(node.func) != "cond":
            continue
        chosen = [*node.args[1:3]][branch : branch + 1]
        chosen += [k.value for k in node.keywords if _BRANCH_KEYWORDS.get(k.arg or "") == branch]
        for candidate in chosen:
            if isinstance(candidate, ast.Lambda):
                lines += [n.lineno for n in ast.walk(candidate.body) if creates(n, op_type)]
    return lines


def lambda_bodies(statement: ast.AST) -> Iterator[ast.AST]:
    for node in ast.walk(statement):
        if isinstance(node, ast.Lambda):
            yield node.body


# TensorFlow names a tf.cond's branch functions `cond_true_12` and `cond_false_13`.
_BRANCH = re.compile(r"^cond_(true|false)_\d+$")
_BRANCH_KEYWORDS = {"true_fn": 0, "false_fn": 1}


def branch_of(function: str) -> int | None:
    """0 for a tf.cond's true branch function, 1 for its false one, None for any other."""
    found = _BRANCH.match(function)
    return None if found is None else (0 if found.group(1) == "true" else 1)


def line_inside_lambda(
    location: SourceLocation, op_type: str, branch: int | None = None
) -> SourceLocation:
    """`OpLines()(location, op_type, branch)`, for one op."""
    return OpLines()(location, op_type, branch)


class OpLines:
    """The line of an op itself when its location is the first line of a statement over
    several lines that made it.

    Autograph writes a converted statement, lambdas included, on one generated line, so
    TensorFlow maps every op of a `tf.cond(..., lambda: ...)`, or of any statement over several
    lines, to the statement's first line. In a lambda (the caller frame on that same line
    betrays it) the op's expression, when it is the only one of its type inside the
    statement's lambdas (or inside the lambda of its `branch` of a tf.cond), names the right
    line; in a statement without lambdas, the statement's one expression of the op's type.

    One instance serves one graph build, asked for every op: each file is parsed and walked
    once and each (line, op type, branch) looked up once; the next build reads the files as
    they are then.
    """

    def __init__(self) -> None:
        self._by_line: dict[str, dict[int, ast.stmt]] = {}
        self._lines: dict[tuple[str, int, str, int | None, bool], int | None] = {}

    def __call__(
        self, location: SourceLocation, op_type: str, branch: int | None = None
    ) -> SourceLocation:
        callers = location.callers
        outer = callers[-1] if callers else None
        in_lambda = outer is not None and (outer.file, outer.line) == (
            location.file,
            location.line,
        )
        key = (location.file, location.line, op_type, branch, in_lambda)
        if key not in self._lines:
            self._lines[key] = self._op_line(*key)
        line = self._lines[key]
        if line is None or line == location.line:
            return location
        return SourceLocation(location.file, line, location.function, callers, location.inside)

    def _statements(self, file: str) -> dict[int, ast.stmt]:
        if file not in self._by_line:
            text = python_source(file)
            tree = None if text is None else parsed(text)
            self._by_line[file] = {} if tree is None else statements_by_line(tree)
        return self._by_line[file]

    def _op_line(
        self, file: str, line: int, op_type: str, branch: int | None, in_lambda: bool
    ) -> int | None:
        statement = self._statements(file).get(line)
        if statement is None or statement.lineno != line:
            return None
        if not in_lambda:
            return _line_in_statement(statement, op_type)
        lines = [
            node.lineno
            for body in lambda_bodies(statement)
            for node in ast.walk(body)
            if creates(node, op_type)
        ]
        if len(lines) > 1 and branch is not None:
            lines = _in_branch(statement, op_type, branch)
        return lines[0] if len(lines) == 1 else None


def _line_in_statement(statement: ast.stmt, op_type: str) -> int | None:
    """The line of the statement's one expression that makes `op_type`, for a statement over
    several lines with no lambda in it."""
    if (statement.end_lineno or statement.lineno) == statement.lineno:
        return None
    if any(isinstance(node, ast.Lambda) for node in ast.walk(statement)):
        return None
    found = [node for node in ast.walk(statement) if creates(node, op_type)]
    return found[0].lineno if len(found) == 1 else None
