"""The command line: parse options, call the library, render, exit."""

from __future__ import annotations

import enum
import os
import sys
import traceback
from dataclasses import dataclass

import click

from gradcheck_cli import __version__
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.reporters import Format, render
from gradcheck_cli.reporters.terminal import TerminalOptions


class ExitCode(enum.IntEnum):
    CLEAN = 0
    DEAD_VARIABLES = 1
    ERROR = 2


@dataclass(frozen=True)
class Options:
    model: str
    loss: str | None
    output_format: Format
    verify: bool
    color: str
    debug: bool
    why: str | None = None
    quiet: bool = False
    verbose: bool = False
    unsafe_deserialization: bool = False


def _use_color(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
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
    click.echo(text, nl=False)
    ctx.exit(ExitCode.CLEAN)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", type=click.Path())
@click.option(
    "--loss", "-l", help="The loss: a function path, signature, SIGNATURE:OUTPUT, or tensor name."
)
@click.option(
    "--format",
    "-f",
    "output_format",
    type=click.Choice([f.value for f in Format]),
    default=Format.TERMINAL.value,
    show_default=True,
    help="Output format.",
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
    model: str,
    loss: str | None,
    output_format: str,
    verify: bool,
    color: str,
    unsafe_deserialization: bool,
    why: str | None,
    quiet: bool,
    verbose: bool,
    debug: bool,
) -> None:
    """Find the trainable variables that LOSS can never train in MODEL, and say why.

    MODEL is a SavedModel directory or a Python script (imported with a __name__ other than
    "__main__"). Exit codes: 0 no dead trainable variable, 1 dead variables, 2 the input could
    not be analysed.
    """
    options = Options(
        model,
        loss,
        Format(output_format),
        verify,
        color,
        debug,
        why,
        quiet,
        verbose,
        unsafe_deserialization,
    )
    sys.exit(run(options))


def run(options: Options) -> ExitCode:
    from gradcheck_cli.api import check

    if options.debug:
        os.environ["GRADCHECK_DEBUG"] = "1"  # the TensorFlow worker prints its tracebacks too
    try:
        report = check(options.model, options.loss, verify=options.verify, all_cuts=options.verbose)
    except GradcheckError as error:
        click.echo(f"gradcheck: error: {error}", err=True)
        return ExitCode.ERROR
    except Exception as error:  # a gradcheck bug: say so plainly, keep exit code 2
        if options.debug:
            traceback.print_exc()
        click.echo(
            f"gradcheck: internal error: {type(error).__name__}: {error} "
            "(run with --debug for the traceback)",
            err=True,
        )
        return ExitCode.ERROR
    if options.why is not None and not any(
        options.why in (v.name, v.path) for v in report.variables
    ):
        names = ", ".join(v.name for v in report.variables[:12])
        click.echo(
            f"gradcheck: error: no variable named {options.why!r}; variables: {names}", err=True
        )
        return ExitCode.ERROR
    terminal = TerminalOptions(
        color=_use_color(options.color),
        width=_terminal_width() if sys.stdout.isatty() else 100,
        focus=options.why,
        quiet=options.quiet,
        verbose=options.verbose,
    )
    text = render(report, options.output_format, terminal)
    click.echo(text, nl=False)
    return ExitCode.DEAD_VARIABLES if report.dead else ExitCode.CLEAN


def _terminal_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 100


def main() -> None:
    command()
