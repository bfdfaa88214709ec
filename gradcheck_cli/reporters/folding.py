"""The terminal report's lines fitted to the terminal's width: prose folded at its spaces, code
between its tokens (never inside a name), tables without the spaces that pad their last cell.

A fold inside brackets is what Python itself accepts (implicit line joining), so a statement
folded there can still be pasted; a fold outside brackets ends its line with ` \\`, and one
inside a comment starts its continuation with `# `. Text that is not Python (a line inside
a docstring) folds at its spaces, as prose does.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

_OPENING = frozenset("([{")
_CLOSING = frozenset(")]}")
# Operators a folded line may start with even where the code has no space before them (`=`
# and keywords only where it has one: never `stddev` / `=1.0`).
_STARTS_A_LINE = frozenset(
    {
        *("+", "-", "*", "/", "//", "%", "**", "@", "|", "&", "^", "<<", ">>"),
        *("==", "!=", "<", ">", "<=", ">=", ":=", "->"),
    }
)
_CLAUSES = frozenset({"for", "if", "else", "and", "or"})
HANGING_INDENT = "    "
"""How much deeper than its line a folded line's continuation is indented."""
_CONTINUED = " \\"  # a fold outside brackets: Python's explicit line joining
_NARROWEST_CODE = 20  # columns of code on a terminal narrower than its margin allows
_NARROWEST_PROSE = 20


def print_line(console: Console, line: str | Text) -> None:
    """One line of the report (markup, or Text). Too long for the console, it folds at a space,
    its continuation lines indented like the line itself; with `soft_wrap` it stays whole."""
    text = Text.from_markup(line) if isinstance(line, str) else line
    if console.soft_wrap:
        console.print(text)
        return
    indent = len(text.plain) - len(text.plain.lstrip(" "))
    body = text[indent:]
    for part in body.wrap(console, max(console.width - indent, _NARROWEST_PROSE)):
        part.rstrip()
        console.print(Text(" " * indent) + part, soft_wrap=True)


def print_table(console: Console, table: Table) -> None:
    """The table's lines without the padding rich puts after their last cell."""
    for line in console.render_lines(table, pad=False):
        text = Text.assemble(*((segment.text, segment.style) for segment in line))
        text.rstrip()
        console.print(text, soft_wrap=True)


def code_lines(console: Console, code: str, margin: int) -> list[str]:
    """A line of code as the console shows it after `margin` columns: whole to a pipe or a file
    (`soft_wrap`), else folded between its tokens."""
    if console.soft_wrap:
        return [code.rstrip()]
    # Measured as the console shows it: rich expands tabs to 8 columns.
    return fold_code(code.expandtabs(8), max(console.width - margin, _NARROWEST_CODE))


@dataclass(frozen=True)
class _Fold:
    """A place the line may fold: the next line starts at `offset`."""

    offset: int
    joined: bool  # Python joins the two lines by itself (inside brackets, before a comment)
    rank: int  # how well a line reads folded here: 3 after a comma ... 0 before a bare operator
    depth: int = 0  # brackets open here: a shallower fold reads better
    comment: bool = False  # inside a comment: the continuation needs its own `#`


def fold_code(code: str, width: int) -> list[str]:
    """`code` (one line, its indentation kept) as lines of at most `width` cells where its tokens
    allow it (a name or string wider than that is never cut: its line overflows);
    continuation lines are indented by HANGING_INDENT more than the line."""
    code = code.rstrip()
    if cell_len(code) <= width:
        return [code]
    indent = code[: len(code) - len(code.lstrip())]
    hang = (indent + HANGING_INDENT) if cell_len(indent) + 8 <= width // 2 else HANGING_INDENT
    folds = _folds(code)
    lines: list[str] = []
    start, prefix = len(indent), indent
    while cell_len(prefix) + cell_len(code[start:]) > width:
        room = width - cell_len(prefix)
        fold = _chosen(code, start, room, folds)
        if fold is None:  # a name or string wider than the room: it overflows, whole
            fold = next(
                (f for f in folds if f.offset > start and code[start : f.offset].strip()), None
            )
            if fold is None:
                break
        line = code[start : fold.offset].rstrip()
        lines.append(prefix + line + ("" if fold.joined else _CONTINUED))
        start = fold.offset
        prefix = hang + ("# " if fold.comment else "")
    lines.append(prefix + code[start:])
    return lines


def _chosen(code: str, start: int, room: int, folds: list[_Fold]) -> _Fold | None:
    """Where the line from `start` folds to fit in `room`: a fold Python joins by itself if one
    fits, else one that needs ` \\`; among those that fill two thirds of the room, the one
    ranked best for its depth (the outermost comma), else the last that fits."""
    fitting: dict[bool, list[tuple[_Fold, int]]] = {True: [], False: []}
    for fold in folds:
        if fold.offset <= start:
            continue
        used = cell_len(code[start : fold.offset].rstrip())
        if used > room:
            break
        if used and (fold.joined or used + len(_CONTINUED) <= room):
            fitting[fold.joined].append((fold, used))
    chosen = fitting[True] or fitting[False]
    if not chosen:
        return None
    full = [fold for fold, used in chosen if 3 * used >= 2 * room]
    if not full:
        return chosen[-1][0]
    return max(full, key=lambda fold: (fold.rank - fold.depth, fold.offset))


def _folds(code: str) -> list[_Fold]:
    """Every place between two tokens of `code` where a line may fold, in order."""
    tokens = _tokens(code.lstrip())
    shift = len(code) - len(code.lstrip())
    folds: list[_Fold] = []
    depth = 0
    previous: tokenize.TokenInfo | None = None
    in_string = 0  # Python 3.12 tokenizes an f-string's parts: never fold between them
    covered = shift
    for token in tokens:
        if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            continue
        start, end = token.start[1] + shift, token.end[1] + shift
        covered = end
        if token.type == tokenize.COMMENT:
            folds.append(_Fold(start, joined=True, rank=3))
            folds += [
                _Fold(start + index + 1, joined=True, rank=1, comment=True)
                for index, character in enumerate(token.string)
                if character == " " and index > 1
            ]
            previous = token
            continue
        rank = None if previous is None or in_string else _rank(previous, token, code, shift)
        if rank is not None:
            folds.append(_Fold(start, joined=depth > 0, rank=rank, depth=depth))
        in_string += _fstring(token, "START") - _fstring(token, "END")
        if token.type == tokenize.OP and token.string in _OPENING:
            depth += 1
        elif token.type == tokenize.OP and token.string in _CLOSING:
            depth = max(depth - 1, 0)
        previous = token
    # What tokenize could not read (the inside of a multi-line string) folds at its spaces.
    folds += [
        _Fold(index + 1, joined=True, rank=1)
        for index in range(covered, len(code))
        if code[index] == " " and code[index + 1 : index + 2] not in ("", " ")
    ]
    return folds


def _rank(
    before: tokenize.TokenInfo, after: tokenize.TokenInfo, code: str, shift: int
) -> int | None:
    """How well a line reads folded between these tokens, None where it never folds (around a
    `.`, inside a name): 3 after a separator; 2 after an opening bracket, or at a space before
    an operator or a clause (`for`, `if`); 1 at another space; 0 before an operator written
    without one."""
    if before.type == tokenize.OP and before.string in (",", ";"):
        return 3
    if before.type == tokenize.OP and before.string in _OPENING:
        return 2
    if before.string == "." or after.string == ".":
        return None
    gap = code[before.end[1] + shift : after.start[1] + shift]
    operator = after.type == tokenize.OP and after.string in _STARTS_A_LINE
    if gap and gap.isspace():
        return 2 if operator or after.string in _CLAUSES else 1
    return 0 if operator else None


def _fstring(token: tokenize.TokenInfo, part: str) -> bool:
    kind = getattr(tokenize, f"FSTRING_{part}", None)
    return kind is not None and token.type == kind


def _tokens(code: str) -> list[tokenize.TokenInfo]:
    """The tokens of one line, as far as tokenize reads it (a line may open a bracket it does
    not close, or sit inside a docstring)."""
    tokens: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.ERRORTOKEN:
                break
            tokens.append(token)
    except (tokenize.TokenError, SyntaxError):
        pass
    return tokens
