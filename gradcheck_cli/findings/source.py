"""The user's source lines, read once per file, so findings can quote the code they point at."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gradcheck_cli.graph.model import SourceLocation

_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=[^=]")


class SourceLines:
    def __init__(self) -> None:
        self._files: dict[str, list[str] | None] = {}

    def line(self, location: SourceLocation | None) -> str | None:
        """The code at `location`, without its line break; None when the file is not readable."""
        if location is None:
            return None
        if location.file not in self._files:
            try:
                text = Path(location.file).read_text(encoding="utf-8", errors="replace")
                self._files[location.file] = text.splitlines()
            except OSError:
                self._files[location.file] = None
        lines = self._files[location.file]
        if lines is None or not 0 < location.line <= len(lines):
            return None
        return lines[location.line - 1]


def assigned_name(code: str | None) -> str | None:
    """`weights_i` for the line `weights_i = tf.Variable(...)`."""
    if code is None:
        return None
    match = _ASSIGNMENT.match(code)
    return match.group(1) if match else None


def assignment(code: str | None) -> tuple[str, str] | None:
    """(target, value source) of a one-line assignment, with an outer tf.stop_gradient removed."""
    if code is None:
        return None
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return None
    statement = tree.body[0]
    source = code.strip()
    if len(statement.targets) != 1:
        return None
    target = ast.get_source_segment(source, statement.targets[0])
    value = statement.value
    if (
        isinstance(value, ast.Call)
        and _called_name(value.func) == "stop_gradient"
        and len(value.args) == 1
    ):
        value = value.args[0]
    text = ast.get_source_segment(source, value)
    if target is None or text is None:
        return None
    return target, text


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
