"""How to check one model: the one options value every entry point and the worker carry."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
import re
import textwrap
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gradcheck_cli.errors import GradcheckError

AllowDead = Mapping[str, str] | Iterable[str]


def _option(default: Any, meaning: str, argument: str | None = None) -> Any:
    """A CheckOptions field: its default, what it does, the type a keyword argument gives."""
    metadata = {"help": meaning} if argument is None else {"help": meaning, "argument": argument}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    """Everything that shapes the check of one model, declared once.

    The CLI, the configuration, the Python API and the pytest plugin build this value and hand
    it down to the worker; adding an option means adding a field here (and a flag to the CLI).
    The public functions take each field as a keyword argument of the same name and default.
    """

    loss: str | None = _option(
        None,
        "the loss inside a file: a function, a signature (SIGNATURE:OUTPUT) or a tensor name; "
        "None: the single loss-like candidate",
    )
    # Stored as (variable-name glob, reason) pairs; the reason may be empty.
    allow_dead: tuple[tuple[str, str], ...] = _option(
        (),
        "glob patterns of variable names (or a mapping pattern -> reason) that may be dead; "
        "they are reported as allowed and left out of `Report.dead`",
        argument="Mapping[str, str] | Iterable[str]",
    )
    verify: bool = _option(
        False, "also ask TensorFlow for its own gradients and report whether they agree"
    )
    all_cuts: bool = _option(
        False, "also name the cuts on the other paths of variables that do train (GC204)"
    )
    unsafe_deserialization: bool = _option(
        False, "let Keras run Python code stored in a .keras file (Lambda layers)"
    )
    imports: tuple[str, ...] = _option(
        (),
        "modules (dotted names importable from the working directory) or .py files to import "
        "before loading a .keras / .h5 file: the code that registers its custom classes",
        argument="Iterable[str]",
    )
    sum_loss: bool = _option(
        False, "check the sum of a loss that is not a scalar, as tf.gradients would"
    )
    timeout: float | None = _option(
        None,
        "seconds a script or Keras file may take in its own process; None: GRADCHECK_TIMEOUT, "
        "else 600",
    )
    memory_limit: int | None = _option(
        None,
        "bytes of memory the process that loads a model may allocate (scripts it starts "
        "included); None: GRADCHECK_MEMORY_LIMIT, else half of the machine's memory and at "
        "least 4 GiB; 0: no limit",
    )
    debug: bool = _option(
        False, "tracebacks and TensorFlow's start-up log from the process that loads a model"
    )
    quiet: bool = _option(
        False,
        "leave out what the model's own code prints while gradcheck imports or runs it "
        "(debug keeps it)",
    )
    progress: bool = _option(
        False,
        "show on stderr what gradcheck is doing: on a terminal, a status line while TensorFlow "
        "imports, loads and traces the model or while gradcheck reads and analyses a "
        "SavedModel; elsewhere, a line every few seconds of a long SavedModel check",
    )
    model_map: bool = _option(
        False,
        "draw the model's map: its layers and name scopes from the inputs to the loss, with the "
        "dead part and its cuts marked (the HTML report's picture, `Report.model_map`)",
    )
    cache: bool = _option(
        True,
        "reuse what an earlier check traced from the same script or Keras file when no file it "
        "read has changed (no TensorFlow then); False: trace it again and store nothing",
    )
    cache_dir: str | None = _option(
        None,
        "the cache's folder; None: GRADCHECK_CACHE_DIR, else the platform's user cache folder",
    )


OPTION_NAMES = tuple(item.name for item in dataclasses.fields(CheckOptions))

DEFAULT_TIMEOUT = 600.0
MAX_TIMEOUT = 86400.0  # one day: more is a typo, and `inf` would overflow the process timer
TIMEOUT_VARIABLE = "GRADCHECK_TIMEOUT"
CACHE_DIR_VARIABLE = "GRADCHECK_CACHE_DIR"


def timeout_seconds(value: str | float) -> float:
    """`value` as a timeout in seconds; a ValueError says why it is not one."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT:  # also false for nan
        raise ValueError(
            f"a timeout is a number of seconds above 0 and at most {MAX_TIMEOUT:g} (one day), "
            f"not {value!r}"
        )
    return seconds


def environment_timeout(environ: Mapping[str, str]) -> float | None:
    """GRADCHECK_TIMEOUT's seconds, or None when it is unset or blank; a GradcheckError names
    the variable when its value is not a timeout."""
    return _from_environment(environ, TIMEOUT_VARIABLE, timeout_seconds)


_Value = TypeVar("_Value")


def _from_environment(
    environ: Mapping[str, str], variable: str, parse: Callable[[str], _Value]
) -> _Value | None:
    """`variable`'s value parsed, or None when it is unset or blank; the ValueError `parse`
    raises becomes a GradcheckError that names the variable."""
    value = environ.get(variable, "")
    if not value.strip():
        return None
    try:
        return parse(value)
    except ValueError as error:
        raise GradcheckError(f"{variable}: {error}") from None


MEMORY_VARIABLE = "GRADCHECK_MEMORY_LIMIT"
MIN_MEMORY_LIMIT = 2**29  # 512 MiB: importing TensorFlow alone takes about 300 MiB
MAX_MEMORY_LIMIT = 2**60
_SIZE_UNITS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def memory_bytes(value: str | int) -> int:
    """`value` ("8GiB", "512M", "2g", "0" or "none": no limit) as bytes; a ValueError says why
    it is not a memory limit."""
    text = str(value)
    if text.strip().lower() in ("0", "none"):
        return 0
    match = _SIZE.fullmatch(text)
    if match is None or not match.group(2):
        raise ValueError(
            f"a memory limit is a size with its unit (8GiB, 512MiB) or 0 for none, not {value!r}"
        )
    size = int(float(match.group(1)) * 2 ** _SIZE_UNITS[match.group(2).lower()])
    if size > MAX_MEMORY_LIMIT:
        raise ValueError(f"a memory limit is at most 1 EiB, or 0 for none, not {value!r}")
    if size < MIN_MEMORY_LIMIT:
        raise ValueError(
            f"a memory limit of {memory_text(size)} is too small to import TensorFlow: at "
            f"least {memory_text(MIN_MEMORY_LIMIT)}, or 0 for none"
        )
    return size


def memory_text(size: int) -> str:
    """`size` bytes as a user reads it: "4 GiB", "512 MiB", "1.5 KiB"."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 2**shift:
            return f"{size / 2**shift:.3g} {unit}"
    return f"{size} bytes"


def environment_memory_limit(environ: Mapping[str, str]) -> int | None:
    """GRADCHECK_MEMORY_LIMIT's bytes, or None when it is unset or blank; a GradcheckError names
    the variable when its value is not a memory limit."""
    return _from_environment(environ, MEMORY_VARIABLE, memory_bytes)


def default_memory_limit() -> int:
    """Half of the machine's memory, and at least 4 GiB: room for any model gradcheck checks,
    while a decompression bomb or a runaway script cannot take the whole machine."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        physical = 0
    return max(2**32, physical // 2)


def check_options(
    caller: str, given: Mapping[str, Any], *, exclude: Collection[str] = ()
) -> CheckOptions:
    """The options that keyword arguments name; an unknown name is a TypeError, as in Python.

    `caller` names the function in the message (`check`); `exclude`: options it does not take.
    """
    names = [name for name in OPTION_NAMES if name not in exclude]
    for name in given:
        if name not in names:
            raise TypeError(
                f"{caller}() got an unexpected keyword argument {name!r}; "
                f"its options are {', '.join(names)}"
            )
    values = dict(given)
    if "allow_dead" in values:
        values["allow_dead"] = allow_dead_pairs(values["allow_dead"])
    if "imports" in values:
        values["imports"] = import_names(values["imports"])
    return CheckOptions(**values)


def allow_dead_pairs(allow_dead: AllowDead) -> tuple[tuple[str, str], ...]:
    """(glob, reason) pairs from glob patterns or a mapping glob -> reason (reason may be '')."""
    if isinstance(allow_dead, str):
        raise TypeError(
            f"allow_dead takes a list of glob patterns or a mapping glob -> reason, not the "
            f"string {allow_dead!r} (write [{allow_dead!r}])"
        )
    if isinstance(allow_dead, Mapping):
        return tuple((str(pattern), str(reason)) for pattern, reason in allow_dead.items())
    return tuple((str(pattern), "") for pattern in allow_dead)


def import_names(imports: Iterable[str]) -> tuple[str, ...]:
    """The modules or .py files to import, from a list of them (a lone string is one of them)."""
    return (imports,) if isinstance(imports, str) else tuple(str(name) for name in imports)


Function = TypeVar("Function", bound=Callable[..., Any])


def takes_check_options(*, exclude: Collection[str] = ()) -> Callable[[Function], Function]:
    """Give a function that takes `**options` the signature that names every option.

    Its `**options` becomes one keyword-only parameter per CheckOptions field (with the field's
    default), so `inspect.signature` and `help()` list them, and its docstring ends with what
    each option does; fields the function already names as parameters (`loss`) and those in
    `exclude` are left out of the signature.
    """

    def decorate(function: Function) -> Function:
        own = inspect.signature(function)
        listed = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
        taken = {p.name for p in listed} | set(exclude)
        options = [
            inspect.Parameter(
                item.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=item.default,
                annotation=item.metadata.get("argument", item.type),
            )
            for item in dataclasses.fields(CheckOptions)
            if item.name not in taken
        ]
        keyword_only = [p for p in listed if p.kind is p.KEYWORD_ONLY]
        leading = [p for p in listed if p.kind is not p.KEYWORD_ONLY]
        function.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[*leading, *options, *keyword_only]
        )
        function.__doc__ = inspect.cleandoc(function.__doc__ or "") + _options_help(
            frozenset(exclude)
        )
        return function

    return decorate


@functools.cache  # the same text for every function that takes the options (a wrap each)
def _options_help(exclude: frozenset[str]) -> str:
    lines = ["", "", "Options (keyword arguments, the fields of CheckOptions):"]
    for item in dataclasses.fields(CheckOptions):
        if item.name not in exclude:
            lines += _option_help(item)
    return "\n".join(lines) + "\n"


@functools.cache
def _option_help(item: dataclasses.Field[Any]) -> tuple[str, ...]:
    text = f"{item.name}={item.default!r}: {item.metadata['help']}"
    return tuple(textwrap.wrap(text, 96, initial_indent="  ", subsequent_indent="      "))
