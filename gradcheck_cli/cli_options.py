"""The command-line options `gradcheck MODEL...` and `gradcheck run SCRIPT` share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gradcheck_cli.config import check_codes
from gradcheck_cli.options import timeout_seconds
from gradcheck_cli.reporters import Format
from gradcheck_cli.run import FailOn

F = TypeVar("F", bound=Callable[..., Any])


class CodeList(click.ParamType):
    """Rule codes or prefixes, comma-separated: `GC1,GC201`."""

    name = "CODES"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        codes = tuple(code.strip() for code in str(value).split(",") if code.strip())
        bad = check_codes(codes)
        if bad is not None:
            self.fail(f"{bad!r} is not a rule code or a prefix of one", param, ctx)
        return codes


class Seconds(click.ParamType):
    """A timeout: a finite number of seconds above 0 and at most one day."""

    name = "SECONDS"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            return timeout_seconds(value)  # type: ignore[arg-type]
        except ValueError as error:
            self.fail(str(error), param, ctx)


IMPORT_OPTION = click.option(
    "--import",
    "imports",
    metavar="MODULE_OR_FILE",
    multiple=True,
    help="Import this module (importable from the working directory) or .py file before "
    "loading a Keras file: the code that registers its custom layers (repeatable).",
)
"""Only `gradcheck MODEL` takes it: a script run by `gradcheck run` imports its own code."""


_SHARED: list[Callable[[Any], Any]] = [
    click.option(
        "--format",
        "-f",
        "output_format",
        type=click.Choice([f.value for f in Format]),
        help="Output format.  [default: terminal]",
    ),
    click.option(
        "--output",
        "-o",
        type=click.Path(path_type=Path),
        help="Write the report to FILE instead of stdout.",
    ),
    click.option(
        "--fail-on",
        type=click.Choice([f.value for f in FailOn]),
        help="The least severe finding that fails the run (exit 1).  [default: error]",
    ),
    click.option(
        "--exit-zero", is_flag=True, help="Exit 0 whatever the findings (2 is still reported)."
    ),
    click.option(
        "--select", type=CodeList(), multiple=True, help="Report only these codes or prefixes."
    ),
    click.option("--ignore", type=CodeList(), multiple=True, help="Drop these codes or prefixes."),
    click.option(
        "--allow-dead",
        metavar="PATTERN",
        multiple=True,
        help=(
            "Accept dead variables whose name, path, layer or name scope matches this glob "
            "(repeatable)."
        ),
    ),
    click.option(
        "--baseline",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Fail only on dead variables not listed in this baseline file.",
    ),
    click.option(
        "--write-baseline",
        type=click.Path(path_type=Path),
        help="Write today's dead variables to this baseline file and exit 0.",
    ),
    click.option(
        "--config",
        "config_file",
        type=click.Path(path_type=Path),
        help="Read settings from this file (a pyproject.toml or a gradcheck.toml) instead of "
        "the nearest pyproject.toml.",
    ),
    click.option(
        "--verify", is_flag=True, help="Also ask TensorFlow for its own gradients and compare."
    ),
    click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour the terminal report (NO_COLOR and FORCE_COLOR are honoured with auto).",
    ),
    click.option(
        "--timeout",
        type=Seconds(),
        help="Seconds a script or Keras file may take to load and trace, at most 86400.  "
        "[default: GRADCHECK_TIMEOUT, else the config's timeout, else 600]",
    ),
    click.option(
        "--why",
        metavar="VARIABLE",
        help=(
            "Explain one variable (a name the report prints: full name, path, short name "
            "when unique) or a layer's variables (its name or attribute)."
        ),
    ),
    click.option("--quiet", "-q", is_flag=True, help="Print only the one-line verdict."),
    click.option("--verbose", "-v", is_flag=True, help="Also show informational findings."),
    click.option("--debug", is_flag=True, help="Show Python tracebacks for errors."),
]


def shared_options(function: F) -> F:
    """Add the options both commands take, in the order `--help` lists them."""
    for option in reversed(_SHARED):
        function = option(function)
    return function
