"""The fixes gradcheck can write itself (`--fix`, `--diff`): each as exact edits of the user's
source, found again in the text before they are applied."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from gradcheck_cli.analysis.verdicts import Blocker, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.advice.fixes import missed_override, offered_rewrite
from gradcheck_cli.findings.advice.transform_source import STOP_REMOVED, Rewrite, expression_at
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.op_expressions import called_name, parsed

# Operands that keep their meaning in any expression without parentheses.
_TIGHT = (ast.Call, ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.List, ast.Tuple)


@dataclass(frozen=True)
class CodeFix:
    """The rewrites that give one dead variable its gradient, and what they do (`what`)."""

    what: str
    edits: tuple[Rewrite, ...]

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(edit.location.file for edit in self.edits))


def code_fix(verdict: VariableVerdict, source: SourceLines) -> CodeFix | None:
    """The edits of the fix the report gives for `verdict` in words, when that fix is code
    gradcheck can write exactly: a gradient_override_map keyed by the op it missed, the
    tf.stop_gradients removed when they are the only cuts (none a library's), or the rewrite of
    the user's own expression (straight-through estimator, soft-argmax, soft threshold)."""
    blockers = verdict.blockers
    if not verdict.dead or not blockers or blockers[0].reason is Reason.LEFT_TENSORFLOW:
        return None
    stops = [b for b in blockers if b.reason is Reason.STOP_GRADIENT]
    missed = _override_key(verdict, source)
    if missed is not None:
        # A stop_gradient on another path than the missed cut's (a quantiser's scale) stays.
        stops = stops if verdict.cuts_without_stop_gradient else []
        removed = [_stop_removed(stop, source) for stop in stops]
        if None in removed:
            return None
        what = f"{missed.what} and {STOP_REMOVED}" if stops else missed.what
        return CodeFix(what, (missed, *(e for e in removed if e is not None)))
    if len(stops) == len(blockers) and not verdict.cuts_without_stop_gradient:
        removed = [_stop_removed(stop, source) for stop in stops]
        if None not in removed:
            return CodeFix(STOP_REMOVED, tuple(e for e in removed if e is not None))
    rewrite = offered_rewrite(verdict, source)
    return None if rewrite is None else CodeFix(rewrite.what, (rewrite,))


def _stop_removed(stop: Blocker, source: SourceLines) -> Rewrite | None:
    """`x` in place of the user's own `tf.stop_gradient(x)` that made this cut."""
    location = stop.location
    if location is None or location.inside is not None:  # a library's: not the user's code
        return None
    found = expression_at(source, location, "StopGradient")
    if found is None:
        return None
    call, parent, _ = found
    if (
        not isinstance(call, ast.Call)
        or len(call.args) != 1
        or any(keyword.arg != "name" for keyword in call.keywords)
    ):
        return None
    original = source.segment(location.file, call)
    argument = source.segment(location.file, call.args[0])
    if original is None or argument is None:
        return None
    if not isinstance(call.args[0], _TIGHT) and _operand(call, parent):
        argument = f"({argument})"
    where = SourceLocation(location.file, call.lineno)
    return Rewrite(where, original, argument, STOP_REMOVED, column=call.col_offset)


def _operand(node: ast.expr, parent: ast.AST | None) -> bool:
    """True if `node` is an operand of an operator (its replacement then needs parentheses)."""
    if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Await)):
        return True
    if isinstance(parent, (ast.Attribute, ast.Subscript)):
        return parent.value is node
    return isinstance(parent, ast.Call) and parent.func is node


def _override_key(verdict: VariableVerdict, source: SourceLines) -> Rewrite | None:
    """The one key of the gradient_override_map that missed the cut's op, rekeyed by its type."""
    found = missed_override(verdict)
    if found is None:
        return None
    step, (mapping, file, line) = found
    tree = source.tree(file) if file is not None else None
    if len(mapping) != 1 or tree is None or line is None:
        return None
    # The map is entered by a `with` statement: its call is on the line TensorFlow names.
    keys = [
        key
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and called_name(call.func) == "gradient_override_map"
        and call.lineno <= line <= (call.end_lineno or call.lineno)
        for argument in (*call.args, *(k.value for k in call.keywords))
        if isinstance(argument, ast.Dict)
        for key in argument.keys
        if isinstance(key, ast.Constant) and key.value == mapping[0][0]
    ]
    original = source.segment(file, keys[0]) if len(keys) == 1 else None
    if original is None:
        return None
    quote = original[0] if original[0] in "'\"" else '"'
    rekeyed = f"{quote}{step.op_type}{quote}"
    what = f"the gradient_override_map keyed by {rekeyed}"
    return Rewrite(SourceLocation(file, keys[0].lineno), original, rekeyed, what)


def applied(text: str, edits: Iterable[Rewrite]) -> str | None:
    """`text` with every edit applied; None when one of them is not found exactly once where it
    says it starts, or two of them overlap (the text changed, or the fix is ambiguous)."""
    tree = parsed(text)
    if tree is None:
        return None
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    lines = text.splitlines(keepends=True)

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + len(lines[line - 1].encode()[:column].decode(errors="ignore"))

    spans: list[tuple[int, int, str]] = []
    for edit in dict.fromkeys(edits):  # an edit two variables share is made once
        wanted = _shape(edit.original)
        found = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.expr)
            and node.lineno == edit.location.line
            and (edit.column is None or node.col_offset == edit.column)
            and ast.dump(node) == wanted
        ]
        if len(found) != 1 or found[0].end_lineno is None or found[0].end_col_offset is None:
            return None
        node = found[0]
        start = offset(node.lineno, node.col_offset)
        spans.append((start, offset(node.end_lineno, node.end_col_offset), edit.replacement))
    spans.sort()
    for (_, end, _), (start, _, _) in zip(spans, spans[1:], strict=False):
        if start < end:
            return None
    for start, end, replacement in reversed(spans):
        text = text[:start] + replacement + text[end:]
    return text if parsed(text) is not None else None


def _shape(expression: str) -> str | None:
    """The expression's syntax tree without positions, to find it in the file as written."""
    try:
        return ast.dump(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, ValueError):
        return None


def unified_diff(path: str, shown: str, before: str, after: str) -> str:
    """`git diff`'s form of one file's change (`a/PATH`, `b/PATH`), for `git apply` and review."""
    import difflib  # for --diff alone: a check imports this module for its fixes' type

    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        git_quoted(f"a/{shown}"),
        git_quoted(f"b/{shown}"),
    )
    # A last line without its line break is marked as `git diff` marks it.
    return "".join(
        line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines
    )


_GIT_ESCAPES = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r"}


def git_quoted(name: str) -> str:
    """`name` as git writes a path in a diff header: as it is, or, when it holds a control
    character, a quote, a backslash or a byte beyond ASCII, in double quotes with C escapes
    (octal for the bytes of other characters), so no name can start a line of its own."""
    if all(0x20 <= ord(c) < 0x7F and c not in '"\\' for c in name):
        return name
    quoted = []
    for character in name:
        if character in _GIT_ESCAPES:
            quoted.append("\\" + _GIT_ESCAPES[character])
        elif character in '"\\':
            quoted.append("\\" + character)
        elif 0x20 <= ord(character) < 0x7F:
            quoted.append(character)
        else:
            encoded = character.encode("utf-8", "surrogateescape")
            quoted.extend(f"\\{byte:03o}" for byte in encoded)
    return '"' + "".join(quoted) + '"'
