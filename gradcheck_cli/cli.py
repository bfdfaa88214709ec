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


def _use_color(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


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
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.version_option(__version__, prog_name="gradcheck")
def command(
    model: str, loss: str | None, output_format: str, verify: bool, color: str, debug: bool
) -> None:
    """Find the trainable variables that LOSS can never train in MODEL, and say why.

    MODEL is a SavedModel directory or a Python script (imported with a __name__ other than
    "__main__"). Exit codes: 0 no dead trainable variable, 1 dead variables, 2 the input could
    not be analysed.
    """
    options = Options(model, loss, Format(output_format), verify, color, debug)
    sys.exit(run(options))


def run(options: Options) -> ExitCode:
    from gradcheck_cli.api import check

    try:
        report = check(options.model, options.loss, verify=options.verify)
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
    width = 100 if not sys.stdout.isatty() else None
    text = render(
        report,
        options.output_format,
        color=_use_color(options.color),
        width=width or _terminal_width(),
    )
    click.echo(text, nl=False)
    return ExitCode.DEAD_VARIABLES if report.dead else ExitCode.CLEAN


def _terminal_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 100


def main() -> None:
    command()
