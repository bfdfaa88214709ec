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
from collections.abc import Mapping
from typing import Any, TypeVar

from gradcheck_cli.errors import ECHO_LIMIT, capped, escape_controls, has_controls
from gradcheck_cli.findings.report import Report

# Fields of gradcheck's own sentences, which keep their line breaks (a fix's code line);
# every other string in a report is a value: a name, a path, an op type.
_PROSE_FIELDS = frozenset({"message", "hint", "error", "detail"})
_PROSE_MAPPINGS = frozenset({"fixes", "intended", "allowed"})

_Value = TypeVar("_Value")


def printable(report: Report) -> Report:
    """A copy of `report` whose names, paths and sentences hold no control character.

    Values (names, op types, paths) escape every control character. gradcheck's own
    sentences (messages, fixes) keep their line breaks, but a name quoted in them is escaped
    first, so no line break in a sentence comes from a model. The loss the user named is
    capped. Equal strings stay equal, so lookups by name (fixes, intended) still match.
    """
    names = _names_with_line_breaks(report)
    if names or any(has_controls(text) for text in _strings(report)):
        report = _Cleaner(names).value(report)
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
        result: Any = value
        if isinstance(value, enum.Enum):
            pass
        elif isinstance(value, str):
            result = self._sentence(value) if prose else escape_controls(value)
        elif isinstance(value, tuple):
            result = tuple(self.value(item, prose) for item in value)
        elif isinstance(value, Mapping):
            result = {self.value(key): self.value(item, prose) for key, item in value.items()}
        elif _is_record(value):
            changed = {
                item.name: self.value(
                    getattr(value, item.name),
                    prose=item.name in _PROSE_FIELDS | _PROSE_MAPPINGS,
                )
                for item in _own_fields(value)
            }
            result = dataclasses.replace(value, **changed)  # type: ignore[type-var]
        return result  # type: ignore[no-any-return]

    def _sentence(self, text: str) -> str:
        for name in self._names:
            text = text.replace(name, escape_controls(name))
        return escape_controls(text, keep_line_feeds=True)


def _is_record(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _own_fields(value: object) -> list[dataclasses.Field[Any]]:
    # Fields left out of comparison link back into the graph (an op's node, a call stack):
    # no reporter prints them, and they stay as they are.
    return [item for item in dataclasses.fields(value) if item.init and item.compare]  # type: ignore[arg-type]


def _strings(value: object, values_only: bool = False) -> list[str]:
    """Every string `value` holds; with `values_only`, gradcheck's own sentences left out."""
    if isinstance(value, enum.Enum):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return [text for item in value for text in _strings(item, values_only)]
    if isinstance(value, Mapping):
        return [text for pair in value.items() for text in _strings(pair, values_only)]
    if not _is_record(value):
        return []
    sentences = _PROSE_FIELDS | _PROSE_MAPPINGS if values_only else frozenset()
    return [
        text
        for item in _own_fields(value)
        if item.name not in sentences
        for text in _strings(getattr(value, item.name), values_only)
    ]


def _names_with_line_breaks(report: Report) -> set[str]:
    """The report's values (names, paths, op types) that hold a line break, and every run of
    their `/`-separated parts: the pieces gradcheck's sentences quote."""
    found: set[str] = set()
    for text in _strings(report, values_only=True):
        if "\n" in text or "\r" in text:
            parts = text.split("/")
            found |= {
                "/".join(parts[start:end])
                for start in range(len(parts))
                for end in range(start + 1, len(parts) + 1)
            }
    return {name for name in found if "\n" in name or "\r" in name}
