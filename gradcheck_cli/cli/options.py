"""The options of `gradcheck MODEL...` and `gradcheck run SCRIPT`, grouped for `--help`
(which `help_layout` lays out)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from gradcheck_cli.config import check_codes
from gradcheck_cli.errors import error_line
from gradcheck_cli.options import MAX_TIMEOUT, memory_bytes, timeout_seconds
from gradcheck_cli.reporters import Format
from gradcheck_cli.run import ExitCode, FailOn

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


class ReportTarget(click.ParamType):
    """Another report of the same check: `FORMAT:FILE` (`sarif:gradcheck.sarif`)."""

    name = "FORMAT:FILE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[Format, Path]:
        if isinstance(value, tuple):
            return value
        chosen, colon, file = str(value).partition(":")
        formats = [f.value for f in Format]
        if not colon or not file or chosen not in formats:
            self.fail(
                f"{value!r} is not FORMAT:FILE with FORMAT one of {', '.join(formats)} "
                "(e.g. sarif:gradcheck.sarif)",
                param,
                ctx,
            )
        return Format(chosen), Path(file)


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


class MemorySize(click.ParamType):
    """A memory limit: a size with its unit (8GiB, 512MiB), or 0 for none."""

    name = "SIZE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return memory_bytes(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


Decorator = Callable[[Any], Any]

INPUT = "Input"
OUTPUT = "Output"
POLICY = "Policy"
RUN = "Run"
HELP = "Help and debugging"
COMMANDS = "Commands"
GROUPS = {
    INPUT: "What to check, and how to load it.",
    OUTPUT: "What the report shows and where it goes.",
    POLICY: "Which findings count, and which fail the run.",
    RUN: "How the check runs.",
}
"""The `--help` sections in order, with their one-line help; HELP holds the ungrouped options."""


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


class GroupedCommand(click.Command):
    """A click command whose `--help` lists its options by group, the ungrouped ones (`--help`
    included) last under HELP: laid out by `help_layout`, imported only to show help or usage."""

    def get_help(self, ctx: click.Context) -> str:
        from gradcheck_cli.cli.help_layout import help_text

        return help_text(self, ctx)

    def get_usage(self, ctx: click.Context) -> str:
        from gradcheck_cli.cli.help_layout import usage_text

        return usage_text(self, ctx)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """A usage error is one line in gradcheck's own form, `gradcheck: error: ...`, and exit
        code 2, like every other error (not click's usage block)."""
        given = list(args)  # click's parser consumes the list it is given
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as error:
            program = f"gradcheck {self.name}" if self.name == "run" else "gradcheck"
            told = self.usage_hint(program, given, error) or (
                f"{error.format_message()} ({program} --help lists the options)"
            )
            click.echo(error_line(f"gradcheck: error: {told}"), err=True)
            sys.exit(ExitCode.ERROR)

    def usage_hint(self, program: str, args: list[str], error: click.UsageError) -> str | None:
        """What to write instead, for a usage error that has a likely cause; None: click's
        own words."""
        return None


class ScriptCommand(GroupedCommand):
    """`gradcheck run SCRIPT [-- SCRIPT ARGS...]`: an option it does not know, after the
    script, is most likely the script's own (`--epochs 1`), which goes after `--`."""

    def usage_hint(self, program: str, args: list[str], error: click.UsageError) -> str | None:
        from gradcheck_cli.cli.usage import option_arity, run_hint

        return run_hint(program, args, error, option_arity(self), _option_names(MODEL_OPTIONS))


def _option_names(groups: Mapping[str | None, Sequence[Decorator]]) -> set[str]:
    """The names (`-l`, `--loss`) of the options that `groups` declares."""

    def holder() -> None: ...

    for option in (option for options in groups.values() for option in options):
        option(holder)
    params: list[click.Parameter] = getattr(holder, "__click_params__", [])
    return {name for param in params for name in param.opts + param.secondary_opts}


class ModelCommand(GroupedCommand):
    """`gradcheck MODEL...`, whose `--help` also shows the commands `main` hands the command
    line to when it starts with their name (`gradcheck run SCRIPT`). (A click group cannot take
    both MODEL... and a command.)"""

    def __init__(self, *args: Any, subcommands: Sequence[click.Command] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.subcommands = tuple(subcommands)

    def usage_hint(self, program: str, args: list[str], error: click.UsageError) -> str | None:
        from gradcheck_cli.cli.usage import option_arity, plain_hint

        subcommands = {str(sub.name): option_arity(sub) for sub in self.subcommands}
        return plain_hint(program, args, error, option_arity(self), subcommands)


LOSS_OPTION = click.option(
    "--loss",
    "-l",
    metavar="NAME",
    help="The loss for every MODEL: a function or attribute path (a compiled Keras model's "
    "too), a signature, SIGNATURE:OUTPUT, a tensor name, or a Keras loss for an uncompiled "
    "Keras file.",
)
JOBS_OPTION = click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Check models in this many processes.",
)
UNSAFE_DESERIALIZATION_OPTION = click.option(
    "--unsafe-deserialization",
    is_flag=True,
    help="Let Keras run Python code stored in a .keras file (Lambda layers); trusted files only.",
)
IMPORT_OPTION = click.option(
    "--import",
    "imports",
    metavar="MODULE_OR_FILE",
    multiple=True,
    help="Import this module (importable from the working directory) or .py file before "
    "loading a Keras file: the code that registers its custom layers (repeatable).",
)
SUM_LOSS_OPTION = click.option(
    "--sum-loss",
    is_flag=True,
    help="Check the sum of a non-scalar loss, as tf.gradients would, instead of refusing it.",
)
NO_CACHE_OPTION = click.option(
    "--no-cache",
    is_flag=True,
    help="Trace every script and Keras file again, even if nothing it read has changed since "
    "the cached trace; store nothing.",
)
CONTINUE_OPTION = click.option(
    "--continue",
    "run_on",
    is_flag=True,
    help="Let the script train on after the report (it is stopped before its first step "
    "otherwise).",
)
OPEN_OPTION = click.option(
    "--open",
    "open_page",
    is_flag=True,
    help="Also write the report as an HTML page to a temporary file and open it in the web "
    "browser.",
)


def _timeout_option(bounded: str) -> Decorator:
    return click.option(
        "--timeout",
        type=Seconds(),
        help=f"Seconds {bounded}, more than 0 and at most {MAX_TIMEOUT:g}.  "
        "[default: GRADCHECK_TIMEOUT, else the config's timeout, else 600]",
    )


def _memory_limit_option(process: str) -> Decorator:
    return click.option(
        "--memory-limit",
        type=MemorySize(),
        help=f"Memory {process} may allocate (8GiB; 0: no limit).  "
        "[default: GRADCHECK_MEMORY_LIMIT, else the config's memory-limit, else half of "
        "the machine's memory, at least 4 GiB]",
    )


MODEL_OPTIONS: dict[str | None, list[Decorator]] = {
    INPUT: [LOSS_OPTION, IMPORT_OPTION, UNSAFE_DESERIALIZATION_OPTION, SUM_LOSS_OPTION],
    RUN: [
        JOBS_OPTION,
        NO_CACHE_OPTION,
        _timeout_option("a script or Keras file may take to load and trace its loss"),
        _memory_limit_option("the process that loads a model (and what a script starts)"),
    ],
}
"""Only `gradcheck MODEL` takes these (a script run by `gradcheck run` imports its own code,
and its own gradient requests say what the loss is); --timeout and --memory-limit, worded for
it (`gradcheck run` has its own)."""
SCRIPT_OPTIONS: dict[str | None, list[Decorator]] = {
    RUN: [
        CONTINUE_OPTION,
        OPEN_OPTION,
        _timeout_option(
            "the script may run until its first gradient request (TensorFlow's import included)"
        ),
        _memory_limit_option("the script's process (and what it starts)"),
    ]
}
"""Only `gradcheck run SCRIPT` takes these; --timeout and --memory-limit, worded for it."""
NO_MODEL = (
    "No MODEL given: name the models to check, or list them in the config file "
    '(models = ["model_dir", "train.py"] under [tool.gradcheck] in pyproject.toml).'
)
"""A bare `gradcheck` with no `models` configured."""


def explain_option(
    callback: Callable[[click.Context, click.Parameter, str | None], None],
) -> Decorator:
    """`--explain RULE`: eager, so it answers before the models and settings are checked."""
    return click.option(
        "--explain",
        metavar="RULE",
        is_eager=True,
        expose_value=False,
        callback=callback,
        help="Explain a rule, by code or name (GC101, stop-gradient-cuts-variable), and exit; "
        "'all' lists every rule.",
    )


_SHARED: dict[str | None, list[Decorator]] = {
    INPUT: [
        click.option(
            "--config",
            "config_file",
            type=click.Path(path_type=Path),
            metavar="FILE",
            help="Read settings from this file (a pyproject.toml or a gradcheck.toml) instead "
            "of the nearest pyproject.toml.",
        ),
    ],
    OUTPUT: [
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
            metavar="FILE",
            help="Write the report to FILE instead of stdout.",
        ),
        click.option(
            "--also",
            "also_write",
            type=ReportTarget(),
            multiple=True,
            help=(
                "Also write the same check's report in FORMAT to FILE (repeatable): "
                "--also sarif:gradcheck.sarif -f github."
            ),
        ),
        click.option(
            "--color",
            type=click.Choice(["auto", "always", "never"]),
            default="auto",
            show_default=True,
            help="Colour the terminal report (NO_COLOR and FORCE_COLOR are honoured with auto).",
        ),
        click.option(
            "--why",
            metavar="VARIABLE",
            help=(
                "Explain one variable (a name the report prints: full name, path, short name "
                "when unique) or a layer's variables (its name or attribute)."
            ),
        ),
        click.option(
            "--quiet",
            "-q",
            is_flag=True,
            help="Print only the one-line verdict, not what a script prints.",
        ),
        click.option(
            "--fix",
            is_flag=True,
            help="Apply the fixes that are code (straight-through estimator, removed "
            "tf.stop_gradient, override-map key) to the scripts, once a check of the fixed "
            "copy finds each variable trained; then report what is left.",
        ),
        click.option(
            "--diff",
            is_flag=True,
            help="Print those fixes as a unified diff on stdout (checked the same way) and "
            "write nothing.",
        ),
        click.option("--verbose", "-v", is_flag=True, help="Also show informational findings."),
    ],
    POLICY: [
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
        click.option(
            "--ignore", type=CodeList(), multiple=True, help="Drop these codes or prefixes."
        ),
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
            metavar="FILE",
            help="Write today's dead variables to this baseline file and exit 0.",
        ),
    ],
    RUN: [
        click.option(
            "--verify",
            is_flag=True,
            help="Also ask TensorFlow for its own gradients of each loss, and compare.",
        ),
    ],
    None: [
        click.option(
            "--debug",
            is_flag=True,
            help="Show Python tracebacks for errors, and TensorFlow's start-up log.",
        )
    ],
}
"""The options both commands take, by `--help` group; None: ungrouped, listed under HELP."""


def grouped_options(own: Mapping[str | None, Sequence[Decorator]]) -> Callable[[F], F]:
    """Add a command's `own` options and the ones both commands take, grouped for `--help`
    (a command's own first in each group), for a command of class GroupedCommand."""

    def decorate(function: F) -> F:
        for title in reversed([*GROUPS, None]):
            options = [*own.get(title, ()), *_SHARED.get(title, ())]
            # Added last to first, as click lists the options of a function bottom-up.
            for option in reversed(options):
                added = len(getattr(function, "__click_params__", ()))
                function = option(function)
                if title is not None:
                    for param in function.__click_params__[added:]:  # type: ignore[attr-defined]
                        setattr(param, _GROUP_TITLE, title)
        return function

    return decorate


_GROUP_TITLE = "gradcheck_help_group"
"""The attribute that holds a grouped option's `--help` group, by title."""


def group_title(param: click.Parameter) -> str | None:
    """The `--help` group `grouped_options` put `param` in; None: ungrouped, under HELP."""
    return getattr(param, _GROUP_TITLE, None)
