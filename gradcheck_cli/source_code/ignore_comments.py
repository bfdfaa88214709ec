"""`# gradcheck: ignore` comments in a Python source, found as real comments (never the same
words inside a string); applying them to findings is the findings layer's."""

from __future__ import annotations

import io
import os
import re
import tokenize
from dataclasses import dataclass

# `gradcheck: ignore`, then optionally `[GC101, GC2]` (codes or prefixes); case as written.
_COMMENT = re.compile(r"#\s*gradcheck:\s*ignore\b(?:\[(?P<codes>[^\]]*)\])?")
_CODE = re.compile(r"GC\d{0,3}")


@dataclass(frozen=True)
class IgnoreComment:
    """One `# gradcheck: ignore` comment; `codes` empty: every code."""

    file: str
    line: int
    codes: tuple[str, ...]
    text: str  # the comment as written, from `gradcheck:`

    def covers(self, code: str) -> bool:
        return not self.codes or code.startswith(self.codes)

    @property
    def where(self) -> str:
        """`model.py:12`: the file relative to the working folder when it lies inside it."""
        relative = os.path.relpath(self.file) if os.path.isabs(self.file) else self.file
        return f"{self.file if relative.startswith('..') else relative}:{self.line}"


def ignore_comments(file: str, text: str) -> list[IgnoreComment]:
    """The ignore comments of a Python source: real comments only (tokenize), never the same
    words inside a string. Codes that are no code (`GCx`, `E501`) are kept out of `codes`, and a
    comment naming only such codes names none of gradcheck's: it suppresses nothing."""
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):  # a file that does not tokenize
        tokens = []
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = _COMMENT.search(token.string)
        if match is None:
            continue
        listed = match.group("codes")
        codes: tuple[str, ...] = ()
        if listed is None and token.string[match.end() :].lstrip().startswith("["):
            codes = ("-",)  # `ignore[GC101` without its `]`: it names nothing for sure
        elif listed is not None:
            names = [name.strip() for name in listed.split(",") if name.strip()]
            codes = tuple(name.upper() for name in names if _CODE.fullmatch(name.upper()))
            if not codes:  # `ignore[]` or only foreign codes: nothing of gradcheck's
                codes = ("-",)
        found.append(IgnoreComment(file, token.start[0], codes, match.group(0).lstrip("# ")))
    return found
