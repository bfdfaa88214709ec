"""A layer's output overwritten before anything reads it: `output = self.linear1(x)`, then
`output = self.linear2(x)` on the next line."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.op_expressions import statement_at


@dataclass(frozen=True)
class Overwrite:
    """`target = call(...)` at `line`, assigned again at `again` before any statement reads it."""

    target: str
    call: str
    line: int
    again: int


def overwritten_output(source: SourceLines, location: SourceLocation | None) -> Overwrite | None:
    """The overwrite of the value assigned at `location`, when the next statement of the same
    block that names the target assigns it without reading it."""
    if location is None:
        return None
    tree = source.tree(location.file)
    statement = statement_at(tree, location.line) if tree is not None else None
    if tree is None or not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    if not isinstance(target, ast.Name) or not isinstance(statement.value, ast.Call):
        return None
    block = _block_of(tree, statement)
    if block is None:
        return None
    for later in block[block.index(statement) + 1 :]:
        names = [n for n in ast.walk(later) if isinstance(n, ast.Name) and n.id == target.id]
        if not names:
            continue
        if _assigns(later, target.id) and not any(isinstance(n.ctx, ast.Load) for n in names):
            call = ast.unparse(statement.value.func)
            return Overwrite(target.id, call, statement.lineno, later.lineno)
        return None
    return None


def _assigns(statement: ast.stmt, name: str) -> bool:
    return isinstance(statement, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in statement.targets
    )


def _block_of(tree: ast.Module, statement: ast.stmt) -> list[ast.stmt] | None:
    """The list of statements that holds `statement` (a function body, a branch, the module)."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and statement in block:
                return block
    return None
