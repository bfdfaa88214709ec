"""The DOT language as gradcheck writes it: quoted ids, attribute lists, multi-line labels."""

from __future__ import annotations


class LeftAligned(tuple[str, ...]):
    """The lines of a label, each aligned left (a fix's code keeps its indentation)."""


# An attribute value: a string, or the lines of a label (joined with DOT's own line break).
Value = str | tuple[str, ...]


def quote(text: str) -> str:
    """`text` as a DOT double-quoted string.

    Only `"` needs escaping for the DOT parser, but labels also read backslash sequences
    (`\\n`, `\\l`, `\\N`...), so a backslash is doubled: names keep their own backslashes.
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n") + '"'


def document(title: str, body: list[str]) -> str:
    """A digraph named gradcheck, top-down, titled `title`, with the statements `body`."""
    lines = [
        "digraph gradcheck {",
        f"  graph [label={quote(title)}, labelloc=t, rankdir=TB, newrank=true];",
        '  node [fontname="Helvetica"];',
        '  edge [fontname="Helvetica"];',
        *body,
        "}",
    ]
    return "\n".join(lines) + "\n"


def statement(head: str, attrs: dict[str, Value]) -> str:
    """A node or edge statement (`head`) with its attributes, sorted."""
    if not attrs:
        return head
    listed = ", ".join(f"{key}={value_text(value)}" for key, value in sorted(attrs.items()))
    return f"{head} [{listed}]"


def value_text(value: Value) -> str:
    """An attribute value as DOT reads it: a quoted string, a label's lines centred (`\\n`)
    or aligned left (`\\l`)."""
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, LeftAligned):
        return '"' + "".join(quote(line)[1:-1] + "\\l" for line in value) + '"'
    return '"' + "\\n".join(quote(line)[1:-1] for line in value) + '"'
