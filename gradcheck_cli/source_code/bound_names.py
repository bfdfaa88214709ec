"""The name a statement binds a created object to (`weights_i = tf.Variable(...)`), only when the
name is certainly that object's."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from gradcheck_cli.source_code.op_expressions import COMPOUND_STATEMENTS


def simple_statements_by_line(tree: ast.Module) -> dict[int, list[ast.stmt]]:
    """Every simple statement of `tree` (no `def`, `if`, `with`...), under each line it spans,
    in the order they start."""
    found: dict[int, list[ast.stmt]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(node, COMPOUND_STATEMENTS):
            continue
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            found.setdefault(line, []).append(node)
    for statements in found.values():
        statements.sort(key=lambda s: (s.lineno, s.col_offset))
    return found


def bound_name(statements: Sequence[ast.stmt], line: int, column: int | None) -> str | None:
    """The name (`w`, `self.proj`) that the statements on `line` bind the object created there
    to, when it is certainly that object's: its statement assigns the creating call's result,
    as it is, to one plain name or attribute.

    `column`: where the creating call starts (Python's own position of the call, in UTF-8 bytes
    as `ast` counts them), when known: it picks the call, and so the statement, on a line of
    several (`w = tf.Variable(1.0); d = tf.Variable(2.0)`). Without it, a line of more than one
    statement names nothing, nor does an assignment whose value is not a call of its own
    (`x = layers.Dense(4)(inputs)` holds the layer's output, not the layer)."""
    if column is not None:
        for statement in statements:
            call = _innermost_call_at(statement, line, column)
            if call is not None:
                return _target_of(statement, call)
        return None
    if len(statements) != 1:
        return None
    (statement,) = statements
    value = getattr(statement, "value", None)
    if not isinstance(value, ast.Call) or isinstance(value.func, ast.Call):
        return None
    return _target_of(statement, value)


def _innermost_call_at(statement: ast.stmt, line: int, column: int) -> ast.Call | None:
    """The innermost call of `statement` that starts at (`line`, `column`): `Dense(4)`, not
    `Dense(4)(inputs)`, which starts there too. A call that starts there and is not the creating
    one is never the statement's whole value unless it is the only one there."""
    found: ast.Call | None = None
    for node in ast.walk(statement):  # outer nodes first
        if isinstance(node, ast.Call) and (node.lineno, node.col_offset) == (line, column):
            found = node
    return found


def _target_of(statement: ast.stmt, call: ast.Call) -> str | None:
    """The one plain target `statement` assigns `call`'s result to, as written."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target: ast.expr = statement.targets[0]
    elif isinstance(statement, ast.AnnAssign):
        target = statement.target
    else:
        return None
    if statement.value is not call:
        return None
    return _dotted(target)


def _dotted(node: ast.expr) -> str | None:
    """`self.proj` for an attribute of a plain name, `w` for a name; None for anything else (a
    tuple, a subscript)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return None if owner is None else f"{owner}.{node.attr}"
    return None
