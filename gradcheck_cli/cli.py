"""The command line: parse options, call the library, render, exit."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from gradcheck_cli.config import (
    Overrides,
    Settings,
    check_codes,
    load_settings,
    resolve_timeout,
)
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.loaders.process_tree import Stopped, stop_on_signals
from gradcheck_cli.options import CheckOptions, timeout_seconds
from gradcheck_cli.report_output import cannot_write, report_error, write_report, write_stdout
from gradcheck_cli.reporters import Format, render
from gradcheck_cli.reporters.terminal import TerminalOptions
from gradcheck_cli.run import (
    ExitCode,
    FailOn,
    ModelCheck,
    Policy,
    check_models,
    exit_code,
    missing_variable,
    write_baseline,
)
from gradcheck_cli.version import __version__

__all__ = ["ExitCode", "Options", "command", "main", "run"]


@dataclass(frozen=True)
class Options:
    """Everything one run needs: the models, the merged settings, how to check and show them.

    `check` holds the flags that shape each check; each model's loss and allowed dead variables
    come from `settings`, where the flags are layered over the configuration file.
    """

    models: tuple[str, ...]
    settings: Settings
    check: CheckOptions = CheckOptions()
    color: str = "auto"
    why: str | None = None
    quiet: bool = False
    verbose: bool = False
    output: Path | None = None
    jobs: int = 1
    exit_zero: bool = False
    write_baseline: Path | None = None


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


def _use_color(choice: str, to_file: bool = False) -> bool:
    if choice != "auto":
        return choice == "always"
    if to_file:
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


def _explain(ctx: click.Context, _param: click.Parameter, code: str | None) -> None:
    # Eager, so it runs before click checks that MODEL was given.
    if code is None or ctx.resilient_parsing:
        return
    from gradcheck_cli.reporters.explain import render_explanation

    width = 100 if not sys.stdout.isatty() else _terminal_width()
    try:
        text = render_explanation(code, color=_use_color("auto"), width=width)
    except GradcheckError as error:
        click.echo(f"gradcheck: error: {error}", err=True)
        ctx.exit(ExitCode.ERROR)
    ctx.exit(write_stdout(text) or ExitCode.CLEAN)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("models", metavar="MODEL...", nargs=-1, required=True, type=click.Path())
@click.option(
    "--loss",
    "-l",
    help="The loss for every MODEL: a function path, signature, SIGNATURE:OUTPUT, or tensor name.",
)
@click.option(
    "--format",
    "-f",
    "output_format",
    type=click.Choice([f.value for f in Format]),
    help="Output format.  [default: terminal]",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    help="Write the report to FILE instead of stdout.",
)
@click.option(
    "--fail-on",
    type=click.Choice([f.value for f in FailOn]),
    help="The least severe finding that fails the run (exit 1).  [default: error]",
)
@click.option(
    "--exit-zero", is_flag=True, help="Exit 0 whatever the findings (2 is still reported)."
)
@click.option(
    "--select", type=CodeList(), multiple=True, help="Report only these codes or prefixes."
)
@click.option("--ignore", type=CodeList(), multiple=True, help="Drop these codes or prefixes.")
@click.option(
    "--allow-dead",
    metavar="PATTERN",
    multiple=True,
    help="Accept dead variables whose name or path matches this glob (repeatable).",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Fail only on dead variables not listed in this baseline file.",
)
@click.option(
    "--write-baseline",
    type=click.Path(path_type=Path),
    help="Write today's dead variables to this baseline file and exit 0.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="Read settings from this file (a pyproject.toml or a gradcheck.toml) instead of "
    "the nearest pyproject.toml.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Check models in this many processes.",
)
@click.option(
    "--verify", is_flag=True, help="Also ask TensorFlow for its own gradients and compare."
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the terminal report (NO_COLOR and FORCE_COLOR are honoured with auto).",
)
@click.option(
    "--unsafe-deserialization",
    is_flag=True,
    help="Let Keras run Python code stored in a .keras file (Lambda layers); trusted files only.",
)
@click.option(
    "--sum-loss",
    is_flag=True,
    help="Check the sum of a non-scalar loss, as tf.gradients would, instead of refusing it.",
)
@click.option(
    "--timeout",
    type=Seconds(),
    help="Seconds a script or Keras file may take to load and trace, at most 86400.  "
    "[default: GRADCHECK_TIMEOUT, else the config's timeout, else 600]",
)
@click.option("--why", metavar="VARIABLE", help="Explain one variable only (its name or path).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the one-line verdict.")
@click.option("--verbose", "-v", is_flag=True, help="Also show informational findings.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.option(
    "--explain",
    metavar="CODE",
    is_eager=True,
    expose_value=False,
    callback=_explain,
    help="Explain a rule (e.g. GC101) and exit; 'all' lists every rule.",
)
@click.version_option(__version__, prog_name="gradcheck")
def command(
    models: tuple[str, ...],
    loss: str | None,
    output_format: str | None,
    output: Path | None,
    fail_on: str | None,
    exit_zero: bool,
    select: tuple[tuple[str, ...], ...],
    ignore: tuple[tuple[str, ...], ...],
    allow_dead: tuple[str, ...],
    baseline: Path | None,
    write_baseline: Path | None,
    config_file: Path | None,
    jobs: int,
    timeout: float | None,
    color: str,
    why: str | None,
    quiet: bool,
    verbose: bool,
    **check_flags: Any,
) -> None:
    """Find the trainable variables that a loss can never train in each MODEL, and say why.

    MODEL is a SavedModel directory, a Python script (imported with a __name__ other than
    "__main__") or a Keras model file. Settings come from [tool.gradcheck] in the nearest
    pyproject.toml (or --config), then these options. Exit codes: 0 nothing fails the run,
    1 findings (dead variables), 2 an input could not be analysed or a file read or written.
    """
    overrides = Overrides(
        loss=loss,
        select=tuple(code for codes in select for code in codes) if select else None,
        ignore=tuple(code for codes in ignore for code in codes),
        allow_dead=allow_dead,
        output_format=Format(output_format) if output_format else None,
        fail_on=FailOn(fail_on) if fail_on else None,
        baseline=baseline,
    )
    try:
        settings = load_settings(overrides, config_file)
        seconds = resolve_timeout(timeout, settings)
    except GradcheckError as error:
        click.echo(f"gradcheck: error: {error}", err=True)
        sys.exit(ExitCode.ERROR)
    # Every flag not named above is named after a CheckOptions field (--verify, --debug...).
    check = CheckOptions(all_cuts=verbose, timeout=seconds, **check_flags)
    options = Options(
        models=models,
        settings=settings,
        check=check,
        color=color,
        why=why,
        quiet=quiet,
        verbose=verbose,
        output=output,
        jobs=jobs,
        exit_zero=exit_zero,
        write_baseline=write_baseline,
    )
    sys.exit(run(options))


def run(options: Options) -> ExitCode:
    """Check the models, write the report (or the baseline), return the exit code.

    A file that cannot be written is found before any model is checked.
    """
    for target in (options.output, options.write_baseline):
        problem = None if target is None else cannot_write(target)
        if problem is not None:
            click.echo(f"gradcheck: error: cannot write {target}: {problem}", err=True)
            return ExitCode.ERROR
    settings = options.settings
    checks = [
        ModelCheck(model, settings.options_for(model, options.check)) for model in options.models
    ]
    policy = Policy(
        select=settings.select,
        ignore=settings.ignore,
        baseline=None if options.write_baseline else settings.baseline,
    )
    try:
        outcomes = check_models(checks, policy, jobs=options.jobs)
    except GradcheckError as error:  # an unreadable baseline
        return report_error(error)
    failed = [outcome for outcome in outcomes if outcome.report is None]
    for outcome in failed:
        if options.check.debug and outcome.trace:
            click.echo(outcome.trace, err=True, nl=False)
        click.echo(outcome.message, err=True)
    reports = [outcome.report for outcome in outcomes if outcome.report is not None]
    if options.write_baseline is not None:
        if failed:
            return ExitCode.ERROR
        try:
            click.echo(write_baseline(options.write_baseline, outcomes), err=True)
        except GradcheckError as error:
            return report_error(error)
        return ExitCode.CLEAN
    if options.why is not None and reports:
        problem = missing_variable(reports, options.why)
        if problem is not None:
            click.echo(problem, err=True)
            return ExitCode.ERROR
    if reports:
        to_file = options.output is not None
        terminal = TerminalOptions(
            color=_use_color(options.color, to_file),
            width=_terminal_width() if not to_file and sys.stdout.isatty() else 100,
            focus=options.why,
            quiet=options.quiet,
            verbose=options.verbose,
        )
        # One report renders as before; several need the multi-report `render`.
        text = render(
            reports[0] if len(reports) == 1 else reports, settings.output_format, terminal
        )
        failure = write_report(text, options.output)
        if failure is not None:
            return failure
    return exit_code(outcomes, settings.fail_on, options.exit_zero)


def _terminal_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 100


def main() -> None:
    """The `gradcheck` command: SIGINT exits 130 and SIGTERM 143, once every worker is gone."""
    stop_on_signals()
    try:
        command()
    except Stopped as stop:
        name = signal.Signals(int(stop.code or 0) - 128).name
        click.echo(f"gradcheck: interrupted by {name}", err=True)
        raise
