"""Names are data: control characters in what a model or a user gave shown as visible escapes.

Every human-readable format (terminal, text, github, markdown, dot) renders a `printable`
copy of its report, escaped by `errors.escape_controls`, as every error line is; each format
still adds its own escaping (Markdown pipes, DOT quotes, workflow-command `%0A`) on top. JSON
and SARIF are data formats: their own string escaping carries every character safely, so
they get the report as it is.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Mapping
from typing import Any, TypeVar

from gradcheck_cli.errors import ECHO_LIMIT, TextKind, capped, escape_controls, has_controls
from gradcheck_cli.findings.report import Report

# Fields of gradcheck's own sentences, which keep their line breaks (a fix's code line), and
# of the user's code (`Report.code`); every other string in a report is a value: a name, a
# path, an op type. The keys of a Mapping are values: `fixes`, `still_cut`, `intended`,
# `allowed` by name.
_SENTENCES = frozenset(
    {"message", "hint", "error", "detail", "fixes", "still_cut", "intended", "allowed"}
)
_CODE = frozenset({"code"})

_Value = TypeVar("_Value")


def printable(report: Report) -> Report:
    """A copy of `report` whose names, paths and sentences hold no control character.

    Values (names, op types, paths) escape every control character. gradcheck's own
    sentences (messages, fixes) keep their line breaks, but a name quoted in them is escaped
    first, so no line break in a sentence comes from a model. The loss the user named is
    capped. Equal strings stay equal, so lookups by name (fixes, intended) still match.
    """
    values: set[str] = set()
    others: set[str] = set()
    _collect(report, values, others)
    if has_controls("".join(values) + "".join(others)):
        report = _Cleaner(_names_with_line_breaks(values)).value(report)
    if len(report.source.loss) > ECHO_LIMIT:
        loss = capped(report.source.loss)
        report = dataclasses.replace(report, source=dataclasses.replace(report.source, loss=loss))
    return report


class _Cleaner:
    """Rebuilds a report's frozen values with their strings escaped."""

    def __init__(self, names: set[str]) -> None:
        # Longest first, so a whole name is escaped before any of its parts.
        self._names = sorted(names, key=len, reverse=True)

    def value(self, value: _Value, kind: TextKind = TextKind.VALUE) -> _Value:
        """`value` with its strings escaped; the very same object when none needs it."""
        result: Any = value
        fields = _fields(type(value))
        if fields is not None:
            changed = {
                name: cleaned
                for name, field_kind in fields
                if (cleaned := self.value(original := getattr(value, name), field_kind))
                is not original
            }
            if changed:
                record = type(value)
                result = record(
                    **{name: getattr(value, name) for name in _init_fields(record)} | changed
                )
        elif isinstance(value, enum.Enum):
            pass
        elif isinstance(value, str):
            if kind is TextKind.SENTENCE:
                escaped = self._sentence(value)
            else:
                escaped = escape_controls(value, kind)
            result = value if escaped == value else escaped
        elif isinstance(value, tuple):
            items = [self.value(item, kind) for item in value]
            if any(new is not old for new, old in zip(items, value)):
                # A named tuple (a graph reference) keeps its type.
                result = value._make(items) if hasattr(value, "_make") else tuple(items)
        elif isinstance(value, Mapping):
            pairs = [(self.value(key), self.value(item, kind)) for key, item in value.items()]
            if any(
                k is not key or v is not item for (k, v), (key, item) in zip(pairs, value.items())
            ):
                result = dict(pairs)
        return result  # type: ignore[no-any-return]

    def _sentence(self, text: str) -> str:
        for name in self._names:
            text = text.replace(name, escape_controls(name))
        return escape_controls(text, TextKind.SENTENCE)


@functools.cache
def _fields(kind: type) -> tuple[tuple[str, TextKind], ...] | None:
    """A record type's own fields, each with the kind of text it holds; None for a type that
    is not a dataclass. Fields left out of comparison link back into the
    graph (an op's node, a call stack): no reporter prints them, and they stay as they are."""
    if not dataclasses.is_dataclass(kind):
        return None
    return tuple(
        (item.name, _kind_of(item.name))
        for item in dataclasses.fields(kind)
        if item.init and item.compare
    )


def _kind_of(field: str) -> TextKind:
    if field in _SENTENCES:
        return TextKind.SENTENCE
    return TextKind.CODE if field in _CODE else TextKind.VALUE


@functools.cache
def _init_fields(kind: type) -> tuple[str, ...]:
    return tuple(item.name for item in dataclasses.fields(kind) if item.init)


def _collect(
    value: object, values: set[str], others: set[str], kind: TextKind = TextKind.VALUE
) -> None:
    """Every string `value` holds, into `values` (names, paths) or `others` (sentences, code)."""
    fields = _fields(type(value))
    if fields is not None:
        for name, field_kind in fields:
            _collect(getattr(value, name), values, others, field_kind)
    elif isinstance(value, enum.Enum):
        pass
    elif isinstance(value, str):
        (values if kind is TextKind.VALUE else others).add(value)
    elif isinstance(value, tuple):
        for item in value:
            _collect(item, values, others, kind)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _collect(key, values, others)
            _collect(item, values, others, kind)


def _names_with_line_breaks(values: set[str]) -> set[str]:
    """The values (names, paths, op types) that hold a line break, and every run of their
    `/`-separated parts: the pieces gradcheck's sentences quote."""
    found: set[str] = set()
    for text in values:
        if "\n" in text or "\r" in text:
            parts = text.split("/")
            found |= {
                "/".join(parts[start:end])
                for start in range(len(parts))
                for end in range(start + 1, len(parts) + 1)
            }
    return {name for name in found if "\n" in name or "\r" in name}
