"""The one error type for input that gradcheck cannot analyse (exit code 2), and the one way
text from outside (names, paths, what the user typed) is shown: as data, never as commands."""

from __future__ import annotations

import enum
import functools
import os
import re

# C0 (tab, line feed and carriage return included), DEL and C1: an ESC or a C1 CSI starts a
# terminal command (a window title, an OSC 52 clipboard write, an OSC 8 link); a line break
# in a name starts a line of its own (a forged `::error` workflow command, a fake finding).
# Lone surrogates too: a file name that is not UTF-8 holds them, and no stream can write them.
# A tab commands nothing and breaks no line: gradcheck's sentences and the user's code keep it.
# Unicode's format characters (category Cf: the bidirectional controls of Trojan Source,
# U+202A to U+202E and U+2066 to U+2069, the marks U+200E, U+200F and U+061C, zero-width
# characters, tags) and the line and paragraph separators: they reorder or hide what a reader
# sees, or break a line where no line break is.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f\ud800-\udfff{_FORMAT}]")
_CONTROL_IN_CODE = f"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff{_FORMAT}]"
_CONTROL_IN_SENTENCE = f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{_FORMAT}]"
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}

ECHO_LIMIT = 500
"""How much of a value the user typed (a `--loss`, a path) an error line or report echoes: a
path as deep as real projects have stays whole; longer is not a name anyone reads whole."""

# An echoed value: a quoted one (as repr() writes it), or a run without spaces (a path).
_LONG_RUN = rf"'[^'\n]{{{ECHO_LIMIT},}}'|\"[^\"\n]{{{ECHO_LIMIT},}}\"|\S{{{ECHO_LIMIT + 1},}}"


class GradcheckError(Exception):
    """Bad input: a missing path, an unreadable model, a loss that cannot be found.

    Its text is one line, whatever the names and paths it quotes hold: `error_line`.
    """

    def __str__(self) -> str:
        return error_line(super().__str__())


class TextKind(enum.Enum):
    """What a piece of text is, for `escape_controls`."""

    VALUE = "value"  # a name, a path, an op type: one line, every control character escaped
    CODE = "code"  # a line of the user's code: its tabs kept
    SENTENCE = "sentence"  # gradcheck's own words (a fix and its code line): tabs, line feeds


_CONTROLS = {
    TextKind.VALUE: _CONTROL.pattern,
    TextKind.CODE: _CONTROL_IN_CODE,
    TextKind.SENTENCE: _CONTROL_IN_SENTENCE,
}


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """A pattern compiled when first used: most runs print no error and escape no code line,
    and each compilation costs a start-up."""
    return re.compile(pattern)


def escape_controls(text: str, kind: TextKind = TextKind.VALUE) -> str:
    """`text` with every C0 and C1 control character, DEL, lone surrogate and Unicode format
    character as a visible escape (`\\x1b`, `\\n`, `\\t`, `\\x9b`, `\\udc9b`, `\\u202e`), so
    it commands no terminal, starts no line and reorders no text; what `kind` of text keeps,
    it keeps."""
    return _compiled(_CONTROLS[kind]).sub(_escape, text)


def has_controls(text: str) -> bool:
    return _CONTROL.search(text) is not None


def capped(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text`, or when longer than `limit` its start and its end (a path's file name) around
    an ellipsis, and its length: `/home/me/…/model.py (4000 characters)`. Capped once only."""
    half = (limit - 1) // 2  # start, ellipsis and end: one run of at most `limit` characters
    if len(text) <= limit or re.fullmatch(rf"(?s).{{{half}}}….{{{half}}} \(\d+ characters\)", text):
        return text
    return f"{text[:half]}…{text[-half:]} ({len(text)} characters)"


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as the user would write it, the same in every message and format: relative to
    the working directory when it lies inside it, else as given."""
    path = os.fspath(path)
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if relative.startswith("..") else relative


def error_line(text: str) -> str:
    """An error message as the one line gradcheck prints: control characters escaped, and
    every long value it echoes (a quoted name, a run without spaces) capped."""
    return _compiled(_LONG_RUN).sub(lambda match: _capped_run(match.group()), escape_controls(text))


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    code = ord(character)
    if character in _NAMED:
        return _NAMED[character]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _capped_run(run: str) -> str:
    quote = run[0] if run[0] in "'\"" and run[-1] == run[0] and len(run) > 1 else ""
    if quote:
        return quote + capped(run[1:-1]) + quote
    return capped(run)
