"""The attribute that marks an op made under a gradient_override_map that does not key its type."""

from __future__ import annotations

import json

from gradcheck_cli.graph.model import MISSED_OVERRIDE

__all__ = ["MISSED_OVERRIDE", "MISSED_OVERRIDE_ATTR", "MissedOverride", "missed_override"]

MISSED_OVERRIDE_ATTR = "_gradcheck_override_map"
"""A NodeDef attribute gradcheck's worker writes (JSON text): the gradient_override_map an op
was made under that does not key its type, and where the map was entered. Read into
`Node.attrs[MISSED_OVERRIDE]` as (the map's items, file, line)."""
_MAX_BYTES = 4096

MissedOverride = tuple[tuple[tuple[str, str], ...], str | None, int | None]


def missed_override(raw: bytes) -> MissedOverride | None:
    """The map's items, file and line of a MISSED_OVERRIDE_ATTR; None for anything else (only
    advice reads it: a malformed one is left out, never an error)."""
    if len(raw) > _MAX_BYTES:
        return None
    try:
        found = json.loads(raw.decode())
        mapping = tuple(sorted((str(k), str(v)) for k, v in dict(found["map"]).items()))
        file, line = found.get("file"), found.get("line")
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return (
        mapping,
        file if isinstance(file, str) else None,
        line if isinstance(line, int) and not isinstance(line, bool) else None,
    )
