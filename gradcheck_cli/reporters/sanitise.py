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

from gradcheck_cli.errors import ECHO_LIMIT, capped, escape_controls, has_controls
from gradcheck_cli.findings.report import Report

# Fields of gradcheck's own sentences, which keep their line breaks (a fix's code line);
# every other string in a report is a value: a name, a path, an op type.
# (In a Mapping of sentences, the keys are names: `fixes`, `intended`, `allowed`.)
_SENTENCES = frozenset({"message", "hint", "error", "detail", "fixes", "intended", "allowed"})

_Value = TypeVar("_Value")


def printable(report: Report) -> Report:
    """A copy of `report` whose names, paths and sentences hold no control character.

    Values (names, op types, paths) escape every control character. gradcheck's own
    sentences (messages, fixes) keep their line breaks, but a name quoted in them is escaped
    first, so no line break in a sentence comes from a model. The loss the user named is
    capped. Equal strings stay equal, so lookups by name (fixes, intended) still match.
    """
    values: set[str] = set()
    sentences: set[str] = set()
    _collect(report, values, sentences)
    if has_controls("".join(values) + "".join(sentences)):
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

    def value(self, value: _Value, prose: bool = False) -> _Value:
        """`value` with its strings escaped; the very same object when none needs it."""
        result: Any = value
        fields = _fields(type(value))
        if fields is not None:
            changed = {
                name: cleaned
                for name, sentence in fields
                if (cleaned := self.value(original := getattr(value, name), sentence))
                is not original
            }
            if changed:
                kind = type(value)
                result = kind(
                    **{name: getattr(value, name) for name in _init_fields(kind)} | changed
                )
        elif isinstance(value, enum.Enum):
            pass
        elif isinstance(value, str):
            escaped = self._sentence(value) if prose else escape_controls(value)
            result = value if escaped == value else escaped
        elif isinstance(value, tuple):
            items = [self.value(item, prose) for item in value]
            if any(new is not old for new, old in zip(items, value)):
                result = tuple(items)
        elif isinstance(value, Mapping):
            pairs = [(self.value(key), self.value(item, prose)) for key, item in value.items()]
            if any(
                k is not key or v is not item for (k, v), (key, item) in zip(pairs, value.items())
            ):
                result = dict(pairs)
        return result  # type: ignore[no-any-return]

    def _sentence(self, text: str) -> str:
        for name in self._names:
            text = text.replace(name, escape_controls(name))
        return escape_controls(text, keep_line_feeds=True)


@functools.cache
def _fields(kind: type) -> tuple[tuple[str, bool], ...] | None:
    """A record type's own fields, each with whether it holds gradcheck's sentences; None
    for a type that is not a dataclass. Fields left out of comparison link back into the
    graph (an op's node, a call stack): no reporter prints them, and they stay as they are."""
    if not dataclasses.is_dataclass(kind):
        return None
    return tuple(
        (item.name, item.name in _SENTENCES)
        for item in dataclasses.fields(kind)
        if item.init and item.compare
    )


@functools.cache
def _init_fields(kind: type) -> tuple[str, ...]:
    return tuple(item.name for item in dataclasses.fields(kind) if item.init)


def _collect(value: object, values: set[str], sentences: set[str], prose: bool = False) -> None:
    """Every string `value` holds, into `values` or, in gradcheck's own sentences, `sentences`."""
    fields = _fields(type(value))
    if fields is not None:
        for name, sentence in fields:
            _collect(getattr(value, name), values, sentences, sentence)
    elif isinstance(value, enum.Enum):
        pass
    elif isinstance(value, str):
        (sentences if prose else values).add(value)
    elif isinstance(value, tuple):
        for item in value:
            _collect(item, values, sentences, prose)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _collect(key, values, sentences)
            _collect(item, values, sentences, prose)


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
