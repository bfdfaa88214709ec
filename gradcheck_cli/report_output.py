"""Deliver the rendered report: what was checked (a report or a failure per model), whether its
target can be written, the writing, and one line why not when a folder, a disk or a closed pipe
refuses it (exit code 2)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from gradcheck_cli.config import os_error_reason
from gradcheck_cli.errors import GradcheckError, error_line, escape_controls
from gradcheck_cli.file_writes import problem_writing, write_file
from gradcheck_cli.findings.report import Report
from gradcheck_cli.pipeline import MODEL_FILE_KINDS
from gradcheck_cli.reporters import CheckFailure
from gradcheck_cli.run import ExitCode, Outcome


def checked_models(outcomes: Sequence[Outcome], *, run: bool) -> list[Report | CheckFailure]:
    """Each outcome's report, or its failure: the path as the reports spell it, the error, and
    the kind when the argument tells it (`run` for `gradcheck run`)."""
    return [
        outcome.report if outcome.report is not None else _failure(outcome, run=run)
        for outcome in outcomes
    ]


def _failure(outcome: Outcome, *, run: bool) -> CheckFailure:
    path = Path(outcome.model)
    if run:
        kind: str | None = "run"
    else:
        kind = None if path.is_dir() else MODEL_FILE_KINDS.get(path.suffix)
    return CheckFailure(str(path), outcome.error or "could not be checked", kind)


def report_error(problem: GradcheckError) -> ExitCode:
    """Say why on stderr, in one line; the exit code for it."""
    say(f"gradcheck: error: {problem}")
    return ExitCode.ERROR


def say(line: str) -> None:
    """Write a line (an error, what was done) to stderr as one line: the names and paths it
    quotes may hold control characters (shown as escapes) and be as long as the user typed
    them (capped)."""
    click.echo(error_line(line), err=True)


def say_traceback(trace: str) -> None:
    """Write a traceback (`--debug`) to stderr, its lines kept, control characters escaped."""
    click.echo(
        "".join(escape_controls(line) + "\n" for line in trace.splitlines()), err=True, nl=False
    )


def cannot_write(path: Path) -> str | None:
    """Why `path` cannot be written, or None; asks the file system, creates no file."""
    return problem_writing(path)


def write_report(text: str, output: Path | None, *, color: bool = False) -> ExitCode | None:
    """Write the report to `output` (stdout if None); on failure say why and return 2.

    `color`: the text holds colour codes on purpose (`--color always`, FORCE_COLOR), kept even
    when stdout is not a terminal."""
    if output is None:
        return write_stdout(text, color=color)
    try:
        write_file(output, text)
    except GradcheckError as error:
        return report_error(error)
    except OSError as error:
        return report_error(GradcheckError(f"cannot write {output}: {os_error_reason(error)}"))
    return None


def write_stdout(text: str, *, color: bool = False) -> ExitCode | None:
    """Write `text` to stdout; on failure return 2, quietly when the reader is gone (EPIPE).

    Without `color`, click strips colour codes from what does not go to a terminal; with it,
    they are written as they are (the caller chose to colour)."""
    try:
        click.echo(text, nl=False, color=True if color else None)
    except OSError as error:
        _discard_stdout()
        if isinstance(error, BrokenPipeError):
            return ExitCode.ERROR  # `gradcheck ... | head`: the reader chose to stop reading
        return report_error(GradcheckError(f"cannot write to stdout: {os_error_reason(error)}"))
    return None


def _discard_stdout() -> None:
    # What stdout still buffers is flushed again when Python exits; a descriptor pointing at
    # devnull takes it, instead of a second failure printed as "Exception ignored".
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (CliRunner, closed)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


def open_page(page: str) -> ExitCode | None:
    """`--open`: write the HTML `page` to a temporary file and open it in the web browser
    ($BROWSER first, as Python's webbrowser chooses); with no browser to open it, one line
    saying where the file is. Exit code 2 if the file cannot be written."""
    import tempfile
    import webbrowser

    try:
        descriptor, name = tempfile.mkstemp(prefix="gradcheck-", suffix=".html")
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(page)
    except OSError as error:
        return report_error(
            GradcheckError(f"cannot write the HTML report: {os_error_reason(error)}")
        )
    try:
        opened = webbrowser.open(Path(name).as_uri())
    except webbrowser.Error:
        opened = False
    if not opened:
        say(f"gradcheck: no web browser to open the HTML report: it is at {name}")
    return None
