"""The settings of one run: defaults < `[tool.gradcheck]` in a TOML file < command-line flags."""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.policy import FailOn
from gradcheck_cli.options import (
    CACHE_DIR_VARIABLE,
    DEFAULT_TIMEOUT,
    CheckOptions,
    allow_dead_pairs,
    environment_memory_limit,
    environment_timeout,
    memory_bytes,
    timeout_seconds,
)
from gradcheck_cli.reporters import Format

KEYS = (
    "models",
    "loss",
    "select",
    "ignore",
    "allow-dead",
    "format",
    "fail-on",
    "baseline",
    "timeout",
    "memory-limit",
    "import",
    "cache",
    "cache-dir",
)
CONFIG_LIMIT = 1 << 20  # bytes: a settings table is a few hundred; more is the wrong file


@dataclass(frozen=True)
class Settings:
    """The merged settings. Paths are absolute (config paths resolved against the file's folder),
    except `models`, which are shown in reports as they are."""

    # What a bare `gradcheck` checks: `models = [...]`, relative to the working directory where
    # they lie under it (as they would be typed), else absolute.
    models: tuple[str, ...] = ()
    loss: str | None = None  # one loss for every model (from --loss or `loss = "..."`)
    # (absolute path glob, loss) from a `loss` table, first match wins.
    losses: tuple[tuple[str, str], ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    # (variable-name glob, reason); the reason may be empty.
    allow_dead: tuple[tuple[str, str], ...] = ()
    output_format: Format = Format.TERMINAL
    fail_on: FailOn = FailOn.ERROR
    baseline: Path | None = None
    timeout: float | None = None  # the file's `timeout`; see `resolve_timeout`
    memory_limit: int | None = None  # the file's `memory-limit`; see `resolve_memory_limit`
    # Modules or .py files (absolute) to import before loading a Keras file; the flags add theirs.
    imports: tuple[str, ...] = ()
    cache: bool = True  # `cache = false`: trace every script and Keras file again
    cache_dir: Path | None = None  # see `resolve_cache_dir`
    # Config files the search passed over, each with why (another user may write them).
    skipped: tuple[str, ...] = ()
    source: Path | None = None  # the file the settings were read from, if any

    def loss_for(self, model: str | os.PathLike[str]) -> str | None:
        """The loss to check `model` with; None lets gradcheck detect it."""
        if self.loss is not None or not self.losses:
            return self.loss
        where = os.path.normpath(Path(model).resolve())
        for pattern, loss in self.losses:
            if fnmatch.fnmatchcase(where, pattern):
                return loss
        return None

    def options_for(self, model: str | os.PathLike[str], flags: CheckOptions) -> CheckOptions:
        """How to check `model`: the flags' options with this loss and these allowed dead, and
        the file's imports before the flags' own."""
        return replace(
            flags,
            loss=self.loss_for(model),
            allow_dead=self.allow_dead,
            imports=self.imports + tuple(i for i in flags.imports if i not in self.imports),
        )


@dataclass(frozen=True)
class Overrides:
    """What the command line said; None (or empty) where it said nothing.

    `select`, `format`, `fail_on`, `loss` and `baseline` replace the file's value; `ignore` and
    `allow_dead` add to it (a flag can silence more, never re-enable what the file silences).
    """

    loss: str | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    allow_dead: tuple[str, ...] = ()
    output_format: Format | None = None
    fail_on: FailOn | None = None
    baseline: Path | None = None


def load_settings(
    overrides: Overrides = Overrides(),
    config: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Settings:
    """Defaults, then the config file (`config`, or the nearest pyproject.toml), then flags."""
    start = Path(cwd) if cwd is not None else Path.cwd()
    base = Settings()
    if config is not None:
        path = Path(config)
        base = parse_table(read_table(path), path)
    else:
        found, skipped = search_pyproject(start)
        if found is not None:
            base = parse_table(read_table(found), found)
        base = replace(base, skipped=skipped)
    return merge(base, overrides, start)


def find_pyproject(start: Path) -> Path | None:
    """The pyproject.toml with a `[tool.gradcheck]` table that governs `start`, if any."""
    return search_pyproject(start)[0]


def search_pyproject(start: Path) -> tuple[Path | None, tuple[str, ...]]:
    """The nearest pyproject.toml with a `[tool.gradcheck]` table, and the config files passed
    over on the way. The search walks up from `start`, never above the repository root (the
    first folder with `.git`), and outside a repository no further than the first
    pyproject.toml: a pyproject.toml above the project, in `/tmp` or a home folder, never
    configures it. A pyproject.toml that another user can change (owned by someone else, or in
    or itself writable by every user) is passed over, with the reason, and ends the search."""
    folders = (start.resolve(), *start.resolve().parents)
    root = next((folder for folder in folders if (folder / ".git").exists()), None)
    for folder in folders:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            unsafe = _writable_by_others(candidate)
            if unsafe is not None:
                return None, (f"ignoring {candidate}: {unsafe}",)
            tool = _load_toml(candidate).get("tool", {})
            if isinstance(tool, dict) and "gradcheck" in tool:
                return candidate, ()
            if root is None:
                return None, ()
        if folder == root:
            break
    return None, ()


def _writable_by_others(path: Path) -> str | None:
    """Why another user could change `path` (a config file), or None if only its owner (you,
    or root) can."""
    me = os.getuid()
    for item, what in ((path, "the file"), (path.parent, "its folder")):
        try:
            info = item.stat()
        except OSError as error:
            return f"{what} cannot be inspected ({os_error_reason(error)})"
        if info.st_uid not in (me, 0):
            return f"{what} belongs to another user (uid {info.st_uid})"
        if info.st_mode & stat.S_IWOTH:
            return f"{what} is writable by every user"
    return None


def read_table(path: Path) -> dict[str, Any]:
    """The gradcheck table of `path`: `[tool.gradcheck]` of a pyproject.toml, else the top level."""
    document = _load_toml(path)
    if path.name != "pyproject.toml":
        return document
    tool = document.get("tool", {})
    if not isinstance(tool, dict) or "gradcheck" not in tool:
        raise GradcheckError(f"{path}: no [tool.gradcheck] table")
    table = tool["gradcheck"]
    if not isinstance(table, dict):
        raise GradcheckError(f"{path}: [tool.gradcheck] must be a table")
    return table


def parse_table(table: Mapping[str, Any], path: Path) -> Settings:
    """Settings from one gradcheck table; every key checked, paths resolved against `path`."""
    where = f"{path}: [tool.gradcheck]" if path.name == "pyproject.toml" else str(path)
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise GradcheckError(f"{where}: unknown key {unknown[0]!r} (known keys: {', '.join(KEYS)})")
    folder = path.resolve().parent
    values: dict[str, Any] = {"source": path}
    if "models" in table:
        if not _is_strings(table["models"]):
            raise _wrong_type(where, "models", 'a list of model paths (["models/train.py"])')
        values["models"] = tuple(os.path.normpath(folder / entry) for entry in table["models"])
    if "loss" in table:
        loss = table["loss"]
        if isinstance(loss, str):
            values["loss"] = loss
        elif isinstance(loss, dict) and all(isinstance(v, str) for v in loss.values()):
            values["losses"] = tuple(
                (os.path.normpath(folder / pattern), name) for pattern, name in loss.items()
            )
        else:
            raise _wrong_type(where, "loss", "a string or a table of model path -> loss name")
    for key in ("select", "ignore"):
        if key in table:
            values[key] = _codes(table[key], where, key)
    if "allow-dead" in table:
        allow = table["allow-dead"]
        if _is_strings(allow) or (
            isinstance(allow, dict) and all(isinstance(v, str) for v in allow.values())
        ):
            values["allow_dead"] = allow_dead_pairs(allow)
        else:
            raise _wrong_type(where, "allow-dead", "a list of globs or a table of glob -> reason")
    if "format" in table:
        values["output_format"] = _choice(table["format"], Format, where, "format")
    if "fail-on" in table:
        values["fail_on"] = _choice(table["fail-on"], FailOn, where, "fail-on")
    if "baseline" in table:
        if not isinstance(table["baseline"], str):
            raise _wrong_type(where, "baseline", "a path (string)")
        values["baseline"] = folder / table["baseline"]
    if "timeout" in table:
        timeout = table["timeout"]
        try:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise ValueError(f"a timeout is a number of seconds, not {timeout!r}")
            values["timeout"] = timeout_seconds(timeout)
        except ValueError as error:
            raise GradcheckError(f"{where}: timeout: {error}") from None
    if "memory-limit" in table:
        limit = table["memory-limit"]
        try:
            if not isinstance(limit, str) and limit != 0:
                raise ValueError(f'a memory limit is a size ("8GiB") or 0, not {limit!r}')
            values["memory_limit"] = memory_bytes(limit)
        except ValueError as error:
            raise GradcheckError(f"{where}: memory-limit: {error}") from None
    if "import" in table:
        if not _is_strings(table["import"]):
            raise _wrong_type(where, "import", 'a list of modules or .py files (["my_layers"])')
        values["imports"] = tuple(_import_entry(entry, folder) for entry in table["import"])
    if "cache" in table:
        if not isinstance(table["cache"], bool):
            raise _wrong_type(where, "cache", "true or false")
        values["cache"] = table["cache"]
    if "cache-dir" in table:
        if not isinstance(table["cache-dir"], str):
            raise _wrong_type(where, "cache-dir", "a path (string)")
        values["cache_dir"] = folder / Path(table["cache-dir"]).expanduser()
    return Settings(**values)


def _import_entry(entry: str, folder: Path) -> str:
    """A .py file resolved against the config's folder; a dotted module name as it is."""
    if entry.endswith(".py") or "/" in entry or os.sep in entry:
        return os.path.normpath(folder / entry)
    return entry


def merge(base: Settings, overrides: Overrides, cwd: Path) -> Settings:
    """`base` with the command line's flags on top; flag paths are relative to `cwd`."""
    return Settings(
        models=tuple(_as_typed(model, cwd) for model in base.models),
        loss=overrides.loss if overrides.loss is not None else base.loss,
        losses=() if overrides.loss is not None else base.losses,
        select=overrides.select if overrides.select is not None else base.select,
        ignore=base.ignore + tuple(c for c in overrides.ignore if c not in base.ignore),
        allow_dead=base.allow_dead + allow_dead_pairs(overrides.allow_dead),
        output_format=overrides.output_format or base.output_format,
        fail_on=overrides.fail_on or base.fail_on,
        baseline=cwd / overrides.baseline if overrides.baseline is not None else base.baseline,
        timeout=base.timeout,
        memory_limit=base.memory_limit,
        imports=base.imports,
        cache=base.cache,
        cache_dir=base.cache_dir,
        source=base.source,
        skipped=base.skipped,
    )


def _as_typed(path: str, cwd: Path) -> str:
    """`path` relative to `cwd` when it lies under it, as a user would type it; else as it is."""
    try:
        return str(Path(path).relative_to(cwd.resolve()))
    except ValueError:
        return path


def resolve_timeout(
    flag: float | None, settings: Settings, environ: Mapping[str, str] | None = None
) -> float:
    """The seconds a model may take to load: the flag, else GRADCHECK_TIMEOUT, else the
    config file's `timeout`, else 600. A bad GRADCHECK_TIMEOUT is a GradcheckError."""
    if flag is not None:
        return flag
    variable = environment_timeout(os.environ if environ is None else environ)
    if variable is not None:
        return variable
    return settings.timeout if settings.timeout is not None else DEFAULT_TIMEOUT


def resolve_memory_limit(
    flag: int | None, settings: Settings, environ: Mapping[str, str] | None = None
) -> int | None:
    """The bytes a model's process may allocate: the flag, else GRADCHECK_MEMORY_LIMIT, else
    the config file's `memory-limit`; None: the default (options.default_memory_limit), which
    the worker's side reckons. A bad GRADCHECK_MEMORY_LIMIT is a GradcheckError."""
    if flag is not None:
        return flag
    variable = environment_memory_limit(os.environ if environ is None else environ)
    return variable if variable is not None else settings.memory_limit


def resolve_cache_dir(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """The cache's folder: GRADCHECK_CACHE_DIR, else the config file's `cache-dir`; None: the
    platform's user cache folder (chosen where the cache is used)."""
    variable = (os.environ if environ is None else environ).get(CACHE_DIR_VARIABLE, "").strip()
    if variable:
        return variable
    return str(settings.cache_dir) if settings.cache_dir is not None else None


def check_codes(codes: tuple[str, ...]) -> str | None:
    """The first entry that is not a rule code or a prefix of one, if any."""
    from gradcheck_cli.findings.rules import RULES

    for code in codes:
        if not code or not any(known.startswith(code) for known in RULES):
            return code
    return None


def _codes(value: Any, where: str, key: str) -> tuple[str, ...]:
    if not _is_strings(value):
        raise _wrong_type(where, key, 'a list of codes or prefixes (e.g. ["GC1", "GC201"])')
    codes = tuple(value)
    bad = check_codes(codes)
    if bad is not None:
        raise GradcheckError(f"{where}: {key}: {bad!r} is not a rule code or a prefix of one")
    return codes


def _choice(value: Any, kind: type[Format] | type[FailOn], where: str, key: str) -> Any:
    names = [member.value for member in kind]
    if value not in names:
        raise GradcheckError(f"{where}: {key} must be one of {', '.join(names)}, not {value!r}")
    return kind(value)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _wrong_type(where: str, key: str, expected: str) -> GradcheckError:
    return GradcheckError(f"{where}: {key} must be {expected}")


def read_text_file(path: Path, limit: int, what: str) -> str:
    """The text of a file the user names: a readable regular UTF-8 file of at most `limit` bytes.

    Anything else is a GradcheckError naming the file and what is wrong. The type is checked
    before opening, since opening a FIFO blocks until a writer comes; at most `limit + 1` bytes
    are read, since /dev/zero or a growing file never ends.
    """
    problem = f"{path}: cannot read the {what}"
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise GradcheckError(f"{problem}: not a regular file")
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise GradcheckError(f"{problem}: {os_error_reason(error)}") from None
    if len(data) > limit:
        raise GradcheckError(f"{problem}: larger than {_size(limit)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise GradcheckError(f"{problem}: not UTF-8 text") from None


def os_error_reason(error: OSError) -> str:
    """What went wrong, as the rest of a one-line message: `permission denied`."""
    reason = error.strerror or str(error)
    return reason[:1].lower() + reason[1:]


def _size(limit: int) -> str:
    return f"{limit / (1 << 20):g} MiB" if limit >= 1 << 20 else f"{limit} bytes"


def _load_toml(path: Path) -> dict[str, Any]:
    """The document, checked whole once: valid TOML, nested at most MAX_NESTING deep, no NUL
    character in any key or string (no path can hold one), and `tool` a table."""
    import tomllib  # only where a config file is found: a check elsewhere reads none

    text = read_text_file(path, CONFIG_LIMIT, "config file")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise GradcheckError(f"{path}: not valid TOML: {error}") from None
    except RecursionError:
        # Told as the walk below tells it: whether the parser recurses out first depends on
        # the interpreter's recursion limit, which the analysis raises.
        raise GradcheckError(f"{path}: nested more than {MAX_NESTING} levels deep") from None
    problem = document_problem(document)
    if problem is not None:
        raise GradcheckError(f"{path}: {problem}")
    if not isinstance(document.get("tool", {}), dict):
        raise GradcheckError(f"{path}: `tool` must be a table")
    return document


MAX_NESTING = 32
"""How deep a config or baseline document may nest tables and lists."""


def document_problem(document: Any) -> str | None:
    """What makes a parsed TOML or JSON document unfit to read, if anything: nesting deeper
    than MAX_NESTING, or a NUL character in a key or a string. Walked without recursion."""
    stack = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            return f"nested more than {MAX_NESTING} levels deep"
        if isinstance(value, str) and "\0" in value:
            shown = value.replace("\0", "\\0")[:60]
            return f"a NUL character in '{shown}'"
        if isinstance(value, dict):
            stack.extend((key, depth + 1) for key in value)
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
    return None
