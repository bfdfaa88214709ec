"""A cache entry as plain JSON: what the worker answered, written and read back without pickle.

Reading constructs only the classes listed here, field by field, without running any of their
code: a file planted in a cache folder can at worst be refused, never run."""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
from typing import Any

from gradcheck_cli.graph.model import (
    CustomGradient,
    SourceLocation,
    TensorFlowVerdict,
    TensorRef,
    Variable,
)
from gradcheck_cli.worker.protocol import (
    EagerResult,
    FileRead,
    GradientRequest,
    IdleTraining,
    ReadKind,
    Reads,
    RunResult,
    TensorFlowGradients,
    TracedFunction,
    TracedGraph,
    TracedVariable,
)

_DATACLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        EagerResult,
        FileRead,
        GradientRequest,
        IdleTraining,
        Reads,
        RunResult,
        SourceLocation,
        TensorFlowGradients,
        TracedFunction,
        TracedGraph,
        TracedVariable,
        Variable,
    )
}
_ENUMS: dict[str, type[enum.Enum]] = {
    cls.__name__: cls for cls in (CustomGradient, ReadKind, TensorFlowVerdict)
}
_TUPLES: dict[str, type] = {"TensorRef": TensorRef}


class EntryError(ValueError):
    """The text is not an entry this version of gradcheck writes."""


def dumps(value: Any) -> str:
    return json.dumps(_encode(value), separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    try:
        return _decode(json.loads(text))
    except (TypeError, KeyError, AttributeError, RecursionError) as error:
        raise EntryError(f"not a gradcheck cache entry: {type(error).__name__}") from error


def _encode(value: Any) -> Any:
    if (
        value is None
        or isinstance(value, (bool, int, float, str))
        and not isinstance(value, enum.Enum)
    ):
        return value
    if isinstance(value, enum.Enum):
        name = type(value).__name__
        if name not in _ENUMS:
            raise EntryError(f"cannot store a {name}")
        return {"e": name, "v": value.value}
    if isinstance(value, bytes):
        return {"b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, tuple) and type(value).__name__ in _TUPLES:
        return {"n": type(value).__name__, "v": [_encode(item) for item in value]}
    if isinstance(value, tuple):
        return {"t": [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, frozenset):
        return {"s": [_encode(item) for item in value]}
    if isinstance(value, dict):
        return {"d": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _DATACLASSES.get(name) is not type(value):
            raise EntryError(f"cannot store a {name}")
        return {
            "c": name,
            "f": {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    raise EntryError(f"cannot store a {type(value).__name__}")


def _decode(data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_decode(item) for item in data]
    if not isinstance(data, dict) or len(data) not in (1, 2):
        raise EntryError("not a gradcheck cache entry")
    if "c" in data:
        cls = _DATACLASSES[data["c"]]
        stored = data["f"]
        instance = object.__new__(cls)
        for field in dataclasses.fields(cls):
            # Set as stored, past __init__ and __post_init__: no code of the class runs.
            object.__setattr__(instance, field.name, _decode(stored[field.name]))
        return instance
    if "e" in data:
        return _ENUMS[data["e"]](data["v"])
    if "b" in data:
        return base64.b64decode(data["b"], validate=True)
    if "n" in data:
        return _TUPLES[data["n"]](*(_decode(item) for item in data["v"]))
    if "t" in data:
        return tuple(_decode(item) for item in data["t"])
    if "s" in data:
        return frozenset(_decode(item) for item in data["s"])
    if "d" in data:
        return {_decode(key): _decode(value) for key, value in data["d"]}
    raise EntryError("not a gradcheck cache entry")
