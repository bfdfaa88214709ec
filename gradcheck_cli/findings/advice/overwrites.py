"""A layer's output overwritten before anything reads it (`output = self.linear1(x)`, then
`output = self.linear2(x)` on the next line), or never read again: the chain of assignments
that carries it ends in a name nothing reads (`output = self.layer3(output)`, then
`return self.layer4(x)`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

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


def unread_output_fix(source: SourceLines, location: SourceLocation | None) -> str | None:
    """The fix for a layer read at `location` whose output the code overwrites or drops, told
    at the lines that do it; None when neither is what the code does."""
    overwrite = overwritten_output(source, location)
    if overwrite is not None:
        return (
            f"the output of {overwrite.call} at line {overwrite.line} ({overwrite.target}) "
            f"is overwritten at line {overwrite.again} before anything reads it: pass "
            f"{overwrite.target} on to the computation that follows, or remove the layer"
        )
    dropped = dropped_output(source, location)
    if dropped is None or location is None:
        return None
    code = (source.line(replace(location, line=dropped.after)) or "").strip()
    return (
        f"`{dropped.target}`, the output of {dropped.call} at line {dropped.line}, is not read "
        f"again: the code after it goes on from other values (line {dropped.after}"
        + (f": `{code}`" if code else "")
        + f"); pass `{dropped.target}` on to the computation the loss is made from (line "
        f"{dropped.after} may mean to read it), or remove the layers that make it; if they are "
        "meant to stay untrained, set their trainable attribute to False"
    )


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


@dataclass(frozen=True)
class Dropped:
    """`target = call(...)` at `line`, the end of the assignments that carry a value, which no
    later statement of its block reads; `after`: the statement that follows it there."""

    target: str
    call: str
    line: int
    after: int


def dropped_output(source: SourceLines, location: SourceLocation | None) -> Dropped | None:
    """Where the value assigned at `location` stops being carried on: following each later
    statement of the same block that reads the name and assigns one name in turn, the one
    assignment where every such chain ends unread; None when the value reaches anything else
    (a return, a call's argument, several names) or is overwritten."""
    if location is None:
        return None
    tree = source.tree(location.file)
    statement = statement_at(tree, location.line) if tree is not None else None
    block = _block_of(tree, statement) if tree is not None and statement is not None else None
    if block is None or _assigned_name(statement) is None:
        return None
    ends: set[int] = set()
    pending, seen = [block.index(statement)], set()
    while pending:
        index = pending.pop()
        if index in seen:
            continue
        seen.add(index)
        name = _assigned_name(block[index])
        readers, overwritten = [], False
        for later in range(index + 1, len(block)):
            names = [n for n in ast.walk(block[later]) if isinstance(n, ast.Name) and n.id == name]
            if any(isinstance(n.ctx, ast.Load) for n in names):
                readers.append(later)
            if _assigns(block[later], name):
                overwritten = not readers or readers[-1] != later
                break
        if overwritten:
            return None
        if not readers:
            ends.add(index)
        for later in readers:
            if _assigned_name(block[later]) is None:
                return None  # read by something other than one name's assignment
            pending.append(later)
    if len(ends) != 1:
        return None
    (end,) = ends
    last = block[end]
    assert isinstance(last, ast.Assign)
    if end + 1 >= len(block) or not isinstance(last.value, ast.Call):
        return None
    name = _assigned_name(last)
    assert name is not None
    return Dropped(name, ast.unparse(last.value.func), last.lineno, block[end + 1].lineno)


def _assigned_name(statement: ast.stmt | None) -> str | None:
    """The one name `statement` assigns (`x = ...`), if that is what it is."""
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    return target.id if isinstance(target, ast.Name) else None
