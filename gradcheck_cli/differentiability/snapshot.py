"""Snapshot TensorFlow's gradient registry and OpDefs into data files, or check them (--check)."""

from __future__ import annotations

import argparse
import ast
import gzip
import inspect
import io
import json
import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
REGISTRY_PATH = DATA_DIR / "registry.json"
OP_DEFS_PATH = DATA_DIR / "op_defs.pb.gz"

# --------------------------------------------------------------------------- AST scan


def _function_def(fn: Callable[..., Any]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The `def` node of `fn`, or None when its source cannot be read (builtins, lambdas)."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    try:
        # Methods and nested functions come back indented.
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return statement
    return None


def _own_returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The `return` statements of `function` itself, not of functions nested inside it."""
    found: list[ast.Return] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _is_none(node: ast.expr | None) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value is None)


@dataclass(frozen=True)
class _ReturnReading:
    """What one `return` statement says about each returned position."""

    none_flags: tuple[bool, ...]
    # False when a `*starred` element hides the positions after `none_flags`.
    complete: bool


def _read_return(value: ast.expr | None) -> _ReturnReading | None:
    """Read a returned tuple/list literal or a bare None; None for any other expression.

    Any other expression may be a list of gradients we cannot see into, so it gives no facts.
    """
    if isinstance(value, (ast.Tuple, ast.List)):
        flags: list[bool] = []
        for element in value.elts:
            if isinstance(element, ast.Starred):
                return _ReturnReading(tuple(flags), complete=False)
            flags.append(_is_none(element))
        return _ReturnReading(tuple(flags), complete=True)
    if _is_none(value):
        return _ReturnReading((True,), complete=True)
    return None


def _resolve_callee(call: ast.Call, fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """The Python function a returned call names (`helper(...)` or `module.helper(...)`)."""
    names: list[str] = []
    target: ast.expr = call.func
    while isinstance(target, ast.Attribute):
        names.append(target.attr)
        target = target.value
    if not isinstance(target, ast.Name):
        return None
    names.append(target.id)
    namespace = getattr(fn, "__globals__", {})
    if names[-1] not in namespace:
        return None
    resolved: Any = namespace[names[-1]]
    for name in reversed(names[:-1]):
        resolved = getattr(resolved, name, None)
    resolved = inspect.unwrap(resolved) if callable(resolved) else None
    return resolved if inspect.isfunction(resolved) else None


def _read_returns(fn: Callable[..., Any], *, follow_calls: bool) -> list[_ReturnReading] | None:
    """A reading of every return of `fn`, or None if any return cannot be read."""
    function = _function_def(fn)
    if function is None:
        return None
    returns = _own_returns(function)
    # A function without `return` either raises (PreventGradient) or falls off the end;
    # neither is a statement we can read, so it contributes nothing.
    if not returns:
        return None
    readings: list[_ReturnReading] = []
    for statement in returns:
        reading = _read_return(statement.value)
        if reading is not None:
            readings.append(reading)
            continue
        # One level into a returned helper call (`return _BaseFusedBatchNormGrad(...)`).
        callee = (
            _resolve_callee(statement.value, fn)
            if follow_calls and isinstance(statement.value, ast.Call)
            else None
        )
        nested = _read_returns(callee, follow_calls=False) if callee is not None else None
        if nested is None:
            return None
        readings.extend(nested)
    return readings


def scan_gradient_function(fn: Callable[..., Any]) -> tuple[list[int], bool]:
    """Input positions `fn` always returns None for, and whether it only ever returns None."""
    readings = _read_returns(fn, follow_calls=True)
    if not readings:
        return [], False
    shortest = min(len(reading.none_flags) for reading in readings)
    positions = [i for i in range(shortest) if all(reading.none_flags[i] for reading in readings)]
    all_none = all(
        reading.complete and reading.none_flags and all(reading.none_flags) for reading in readings
    )
    return positions, all_none


# --------------------------------------------------------------------------- TensorFlow side


def _import_tensorflow() -> Any:
    # Set before the import: TF_ENABLE_ONEDNN_OPTS is the only way to silence the oneDNN banner.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow

    return tensorflow


def registry_snapshot() -> dict[str, Any]:
    """The registry.json content for the installed TensorFlow."""
    tensorflow = _import_tensorflow()
    from tensorflow.python.framework import ops

    # `{"type": fn_or_None, "location": frame}`; `no_gradient` registers None.
    entries: dict[str, dict[str, Any]] = ops._gradient_registry._registry
    not_differentiable = sorted(op for op, entry in entries.items() if entry["type"] is None)
    registered = sorted(op for op, entry in entries.items() if entry["type"] is not None)
    none_inputs: dict[str, list[int]] = {}
    all_none: list[str] = []
    for op_type in registered:
        positions, only_none = scan_gradient_function(entries[op_type]["type"])
        if positions:
            none_inputs[op_type] = positions
        if only_none:
            all_none.append(op_type)
    return {
        "tensorflow_version": tensorflow.__version__,
        "not_differentiable": not_differentiable,
        "registered": registered,
        "none_inputs": dict(sorted(none_inputs.items())),
        "all_none": all_none,
    }


def op_list_snapshot() -> Any:
    """Every OpDef registered in the installed TensorFlow, as an OpList sorted by name."""
    _import_tensorflow()
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    everything = op_def_pb2.OpList()
    everything.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    ordered = op_def_pb2.OpList()
    ordered.op.extend(sorted(everything.op, key=lambda op_def: op_def.name))
    return ordered


def _registry_bytes(snapshot: dict[str, Any]) -> bytes:
    """Sorted keys and one entry a line, so the file diffs well between TensorFlow versions."""
    lines = ["{"]
    keys = sorted(snapshot)
    for key_index, key in enumerate(keys):
        value = snapshot[key]
        comma = "," if key_index < len(keys) - 1 else ""
        if isinstance(value, dict):
            lines.append(f" {json.dumps(key)}: {{")
            items = sorted(value.items())
            for item_index, (name, entry) in enumerate(items):
                item_comma = "," if item_index < len(items) - 1 else ""
                lines.append(f"  {json.dumps(name)}: {json.dumps(entry)}{item_comma}")
            lines.append(f" }}{comma}")
        elif isinstance(value, list):
            lines.append(f" {json.dumps(key)}: [")
            lines += [
                f"  {json.dumps(entry)}{',' if i < len(value) - 1 else ''}"
                for i, entry in enumerate(value)
            ]
            lines.append(f" ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode()


def _op_list_bytes(op_list: Any) -> bytes:
    buffer = io.BytesIO()
    # mtime=0 and no file name in the header make the bytes a function of the content only.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        out.write(op_list.SerializeToString(deterministic=True))
    return buffer.getvalue()


def write() -> None:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    REGISTRY_PATH.write_bytes(_registry_bytes(registry_snapshot()))
    OP_DEFS_PATH.write_bytes(_op_list_bytes(op_list_snapshot()))


# --------------------------------------------------------------------------- --check


def _set_difference(label: str, stored: Iterable[Any], live: Iterable[Any]) -> list[str]:
    stored_set, live_set = set(stored), set(live)
    lines = [f"{label}: only in TensorFlow: {item}" for item in sorted(live_set - stored_set)]
    lines += [f"{label}: only in snapshot: {item}" for item in sorted(stored_set - live_set)]
    return lines


def registry_differences(stored: dict[str, Any], live: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if stored.get("tensorflow_version") != live["tensorflow_version"]:
        lines.append(
            f"tensorflow_version: snapshot {stored.get('tensorflow_version')}, "
            f"installed {live['tensorflow_version']}"
        )
    for key in ("not_differentiable", "registered", "all_none"):
        lines += _set_difference(key, stored.get(key, []), live[key])
    stored_none = stored.get("none_inputs", {})
    lines += _set_difference("none_inputs", stored_none, live["none_inputs"])
    for op_type in sorted(set(stored_none) & set(live["none_inputs"])):
        if stored_none[op_type] != live["none_inputs"][op_type]:
            lines.append(
                f"none_inputs[{op_type}]: snapshot {stored_none[op_type]}, "
                f"installed {live['none_inputs'][op_type]}"
            )
    return lines


def _arg_structure(op_def: Any) -> tuple[tuple[tuple[Any, ...], ...], ...]:
    def args(arg_defs: Sequence[Any]) -> tuple[tuple[Any, ...], ...]:
        return tuple(
            (a.name, a.type, a.type_attr, a.number_attr, a.type_list_attr, a.is_ref)
            for a in arg_defs
        )

    return args(op_def.input_arg), args(op_def.output_arg)


def op_list_differences(stored_bytes: bytes, live: Any) -> list[str]:
    from tensorflow.core.framework import op_def_pb2

    stored = op_def_pb2.OpList()
    stored.ParseFromString(gzip.decompress(stored_bytes))
    stored_by_name = {op_def.name: op_def for op_def in stored.op}
    live_by_name = {op_def.name: op_def for op_def in live.op}
    lines = _set_difference("op_defs", stored_by_name, live_by_name)
    for name in sorted(set(stored_by_name) & set(live_by_name)):
        if _arg_structure(stored_by_name[name]) != _arg_structure(live_by_name[name]):
            lines.append(f"op_defs[{name}]: input/output args differ")
    return lines


def check() -> list[str]:
    """Differences between the data files and the installed TensorFlow (empty if equal)."""
    lines: list[str] = []
    if REGISTRY_PATH.exists():
        stored = json.loads(REGISTRY_PATH.read_text())
        lines += registry_differences(stored, registry_snapshot())
    else:
        lines.append(f"missing {REGISTRY_PATH}")
    if OP_DEFS_PATH.exists():
        lines += op_list_differences(OP_DEFS_PATH.read_bytes(), op_list_snapshot())
    else:
        lines.append(f"missing {OP_DEFS_PATH}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gradcheck_cli.differentiability.snapshot",
        description="Write (or --check) the differentiability data files from TensorFlow.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare the data files with the installed TensorFlow; exit 1 if they differ",
    )
    options = parser.parse_args(argv)
    if not options.check:
        write()
        print(f"wrote {REGISTRY_PATH} and {OP_DEFS_PATH}")
        return 0
    differences = check()
    for line in differences:
        print(line)
    if differences:
        print(f"{len(differences)} difference(s); rerun without --check to refresh the snapshot")
        return 1
    print("snapshot matches the installed TensorFlow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
