"""The command line: parse options, call the library, render, exit."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from gradcheck_cli.cli.options import (
    CONTEXT_SETTINGS,
    MODEL_OPTIONS,
    NO_MODEL,
    SCRIPT_OPTIONS,
    ModelCommand,
    ScriptCommand,
    explain_option,
    grouped_options,
)
from gradcheck_cli.config import (
    Overrides,
    Settings,
    load_settings,
    resolve_cache_dir,
    resolve_memory_limit,
    resolve_timeout,
)
from gradcheck_cli.errors import GradcheckError, escape_controls
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.report_output import (
    cannot_write,
    checked_models,
    open_page,
    report_error,
    say,
    say_traceback,
    write_report,
    write_stdout,
)
from gradcheck_cli.reporters import Format, TerminalOptions, auto_color, render
from gradcheck_cli.run import (
    ExitCode,
    FailOn,
    ModelCheck,
    Outcome,
    Policy,
    check_models,
    check_script,
    exit_code,
    missing_variable,
    write_baseline,
)
from gradcheck_cli.version import __version__
from gradcheck_cli.worker.process_tree import Stopped, stop_on_signals

__all__ = ["ExitCode", "Options", "command", "main", "run", "run_command"]


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
    # `--also FORMAT:FILE`: more reports of the same check, each written to its file.
    also_write: tuple[tuple[Format, Path], ...] = ()
    jobs: int = 1
    exit_zero: bool = False
    write_baseline: Path | None = None
    # `gradcheck run`: the script's own arguments, and whether it trains on after the report.
    script_arguments: tuple[str, ...] | None = None
    run_on: bool = False
    # `gradcheck run --open`: the HTML report also written to a temporary file and opened.
    open_page: bool = False
    # `--fix` (write the verified code fixes) and `--diff` (print them, write nothing).
    fix: bool = False
    diff: bool = False


def _use_color(choice: str, to_file: bool = False) -> bool:
    """`--color always|never`, else: no colour in a file or with NO_COLOR, colour with
    FORCE_COLOR (any value but empty), else colour on a terminal only."""
    if choice != "auto":
        return choice == "always"
    return not to_file and auto_color(sys.stdout)


def _explain(ctx: click.Context, _param: click.Parameter, code: str | None) -> None:
    # Eager, so it runs before click checks that MODEL was given.
    if code is None or ctx.resilient_parsing:
        return
    from gradcheck_cli.reporters.explain import render_explanation

    color = _use_color("auto")
    try:
        text = render_explanation(code, color=color, width=_terminal_width(to_file=False))
    except GradcheckError as error:
        report_error(error)
        ctx.exit(ExitCode.ERROR)
    ctx.exit(write_stdout(text, color=color) or ExitCode.CLEAN)


@click.command(
    "run",
    cls=ScriptCommand,
    context_settings=CONTEXT_SETTINGS,
    short_help="Run a training script unchanged, as python would, and check each gradient "
    "request it makes before its first training step.",
)
@click.argument("script", metavar="SCRIPT", type=click.Path())
@click.argument("arguments", metavar="[-- SCRIPT ARGS...]", nargs=-1, type=click.UNPROCESSED)
@grouped_options(SCRIPT_OPTIONS)
def run_command(script: str, arguments: tuple[str, ...], run_on: bool, **flags: Any) -> None:
    """Run a training SCRIPT (or notebook) unchanged, as `python SCRIPT ARGS...` would, and
    check every gradient request it makes before its first training step changes a weight.

    Each request (GradientTape.gradient, tf.gradients, Optimizer.minimize, Model.fit) is judged
    on the variables it differentiates. Arguments after `--` go to the script. Exit codes: 0
    nothing fails the run, 1 findings (dead variables), 2 the script failed, or never asked for
    gradients within --timeout.
    """
    options = _options((script,), flags, script_arguments=arguments, run_on=run_on)
    sys.exit(run(options))


@click.command(cls=ModelCommand, context_settings=CONTEXT_SETTINGS, subcommands=[run_command])
@click.argument("models", metavar="[MODEL]...", nargs=-1, type=click.Path())
@explain_option(_explain)
@click.version_option(__version__, prog_name="gradcheck")
@grouped_options(MODEL_OPTIONS)
def command(models: tuple[str, ...], jobs: int, **flags: Any) -> None:
    """Find the trainable variables that a loss can never train in each MODEL, and say why.

    MODEL is a SavedModel directory, a Python script (imported with a __name__ other than
    "__main__") or a Keras model file; without MODEL, the `models` listed in the config file
    are checked. To check a training script as it runs, at its first training step, use
    `gradcheck run SCRIPT`. Settings come from [tool.gradcheck] in the nearest pyproject.toml
    (or --config), then these options. Exit codes: 0 nothing fails the run, 1 findings (dead
    variables), 2 an input could not be analysed or a file read or written.
    """
    options = _options(models, flags, jobs=jobs)
    if not options.models:
        raise click.UsageError(NO_MODEL)
    sys.exit(run(options))


def _options(models: tuple[str, ...], flags: dict[str, Any], **extra: Any) -> Options:
    """Settings from the configuration file with the flags over them; exit 2 on a bad one."""
    select, ignore = flags.pop("select"), flags.pop("ignore")
    output_format, fail_on = flags.pop("output_format"), flags.pop("fail_on")
    overrides = Overrides(
        loss=flags.pop("loss", None),
        select=tuple(code for codes in select for code in codes) if select else None,
        ignore=tuple(code for codes in ignore for code in codes),
        allow_dead=flags.pop("allow_dead"),
        output_format=Format(output_format) if output_format else None,
        fail_on=FailOn(fail_on) if fail_on else None,
        baseline=flags.pop("baseline"),
    )
    config_file, timeout = flags.pop("config_file"), flags.pop("timeout")
    memory_limit = flags.pop("memory_limit")
    no_cache = flags.pop("no_cache", False)  # `gradcheck run` caches nothing
    open_page = flags.pop("open_page", False)  # `gradcheck run` only
    try:
        settings = load_settings(overrides, config_file)
        for skipped in settings.skipped:
            click.echo(f"gradcheck: warning: {skipped}", err=True)
        seconds = resolve_timeout(timeout, settings)
        memory_limit = resolve_memory_limit(memory_limit, settings)
    except GradcheckError as error:
        report_error(error)
        sys.exit(ExitCode.ERROR)
    display = {
        name: flags.pop(name)
        for name in (
            *("color", "why", "quiet", "verbose", "output", "also_write", "exit_zero"),
            *("write_baseline", "fix", "diff"),
        )
    }
    # Every flag left is named after a CheckOptions field (--verify, --debug...). Progress shows
    # on stderr (a status line on a terminal), but not with -q, nor for models checked side by
    # side.
    # No MODEL argument: the config's `models`.
    chosen = models or settings.models
    alone = extra.get("jobs", 1) == 1 or len(chosen) == 1
    # The model's map is drawn only for a report that shows it: an HTML page.
    pictured = {settings.output_format, *(f for f, _ in display["also_write"])}
    check = CheckOptions(
        model_map=Format.HTML in pictured or open_page,
        all_cuts=display["verbose"],
        timeout=seconds,
        memory_limit=memory_limit,
        quiet=display["quiet"],
        progress=alone and not display["quiet"],
        cache=settings.cache and not no_cache,
        cache_dir=resolve_cache_dir(settings),
        **flags,
    )
    return Options(
        models=chosen, settings=settings, check=check, open_page=open_page, **display, **extra
    )


def run(options: Options) -> ExitCode:
    """Check the models, write the report (or the baseline), return the exit code.

    A file that cannot be written is found before any model is checked.
    """
    conflict = _fix_conflict(options)
    if conflict is not None:
        say(f"gradcheck: error: {conflict}")
        return ExitCode.ERROR
    reports = [t for t in (options.output, *(f for _, f in options.also_write)) if t is not None]
    if len({os.path.realpath(target) for target in reports}) < len(reports):
        say("gradcheck: error: two reports would be written to the same file (-o, --also)")
        return ExitCode.ERROR
    for target in (*reports, options.write_baseline):
        problem = None if target is None else cannot_write(target)
        if problem is not None:
            say(f"gradcheck: error: cannot write {target}: {problem}")
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
    shown: list[ExitCode | None] = []  # `--continue`: the report went out while the script ran

    def show(early: list[Outcome]) -> None:
        shown.append(_write_reports(early, options))

    try:
        if options.script_arguments is not None:
            script, check = checks[0].model, checks[0].options
            on_outcomes = show if options.run_on else None
            outcomes = check_script(
                script,
                options.script_arguments,
                check,
                policy,
                run_on=options.run_on,
                on_outcomes=on_outcomes,
            )
        else:
            outcomes = check_models(checks, policy, jobs=options.jobs)
    except GradcheckError as error:  # an unreadable baseline
        return report_error(error)
    failed = [outcome for outcome in outcomes if outcome.report is None]
    for outcome in failed:
        if options.check.debug and outcome.trace:
            say_traceback(outcome.trace)
        say(outcome.message)
    reports = [outcome.report for outcome in outcomes if outcome.report is not None]
    if options.write_baseline is not None:
        if failed:
            return ExitCode.ERROR
        try:
            say(write_baseline(options.write_baseline, outcomes))
        except GradcheckError as error:
            return report_error(error)
        return ExitCode.CLEAN
    if options.fix or options.diff:
        return _fixed(options, checks, policy, outcomes)
    if options.why is not None and reports:
        problem = missing_variable(reports, options.why)
        if problem is not None:
            say(problem)
            return ExitCode.ERROR
    failure = shown[0] if shown else _write_reports(outcomes, options)
    if failure is not None:
        return failure
    return exit_code(outcomes, settings.fail_on, options.exit_zero)


def _fix_conflict(options: Options) -> str | None:
    """Why `--fix` / `--diff` cannot go with the other flags given, if they cannot."""
    if options.fix and options.diff:
        return "--fix writes the fixes and --diff only prints them: choose one"
    chosen = "--fix" if options.fix else "--diff" if options.diff else None
    if chosen is not None and options.write_baseline is not None:
        return f"{chosen} and --write-baseline: fix first, then write the baseline of what is left"
    if chosen is not None and options.run_on:
        return (
            f"{chosen} checks the fixed script again: it cannot let the script train on "
            "(--continue)"
        )
    if options.diff and (options.output is not None or options.also_write):
        return "--diff prints the diff on stdout: it writes no report (-o, --also)"
    return None


def _fixed(
    options: Options, checks: list[ModelCheck], policy: Policy, outcomes: list[Outcome]
) -> ExitCode:
    """`--fix` / `--diff`: the verified code fixes written (then the report of what is left) or
    printed as a diff."""
    from gradcheck_cli.errors import display_path
    from gradcheck_cli.fixing import find_fixes, write_changes

    fixes = find_fixes(checks, outcomes, policy, options.script_arguments)
    for model, name in dict.fromkeys(fixes.unverified):
        say(
            f"gradcheck: {display_path(model)}: the fix of {name} did not give it a gradient "
            "when gradcheck checked the fixed copy; it is left in words"
        )
    verb = "fixed" if options.fix else "would fix"
    if options.diff:
        failure = write_stdout("".join(change.diff() for change in fixes.changes), color=False)
        if failure is not None:
            return failure
    else:
        named = [Path(check.model) for check in checks]  # the user named these: theirs
        problems = write_changes(fixes.changes, [p if p.is_dir() else p.parent for p in named])
        for problem in problems:
            say(f"gradcheck: error: {problem}")
        if problems:
            return ExitCode.ERROR
    for fixed in fixes.fixed:
        say(
            f"gradcheck: {verb} {fixed.variable} at {display_path(fixed.file)}:{fixed.line}: "
            f"{fixed.what}"
        )
    if not fixes.fixed and any(outcome.report is not None for outcome in outcomes):
        say("gradcheck: no fix gradcheck can write: the report's fixes are in words")
    # A model that could not be checked was told before, by the run.
    code = exit_code(fixes.outcomes, options.settings.fail_on, options.exit_zero)
    if options.diff:
        left = sum(len(o.report.dead) for o in fixes.outcomes if o.report is not None)
        if fixes.fixed or left:
            say(f"gradcheck: after the diff: {_dead_left(left)}")
        if fixes.changes and code is ExitCode.CLEAN and not options.exit_zero:
            return ExitCode.DEAD_VARIABLES
        return code
    return _write_reports(fixes.outcomes, options) or code


def _dead_left(count: int) -> str:
    if count == 0:
        return "no dead variable left"
    return (
        f"{count} dead variable{'s' if count > 1 else ''} left (run without --diff for the report)"
    )


def _write_reports(outcomes: list[Outcome], options: Options) -> ExitCode | None:
    """Render the outcomes to stdout or --output; an exit code if they could not be written.

    One outcome is one document, several a list of them; with nothing checked, only the
    formats that tell failures (json, sarif, github) write.
    """
    checked = checked_models(outcomes, run=options.script_arguments is not None)
    to_file = options.output is not None
    terminal = TerminalOptions(
        color=_use_color(options.color, to_file),
        width=_terminal_width(to_file),
        focus=options.why,
        quiet=options.quiet,
        verbose=options.verbose,
        fail_on=FailOn.NEVER if options.exit_zero else options.settings.fail_on,
    )
    chosen = checked[0] if len(checked) == 1 else checked
    # The other reports first: the main report's exit code is the run's.
    plain = replace(terminal, color=False, width=None)  # a file gets whole lines, no colour
    for output_format, path in options.also_write:
        failure = write_report(render(chosen, output_format, plain), path)
        if failure is not None:
            return failure
    text = render(chosen, options.settings.output_format, terminal)
    if not text and not any(outcome.report is not None for outcome in outcomes):
        return None
    failure = write_report(text, options.output, color=terminal.color)
    if failure is None and options.open_page:
        return open_page(render(chosen, Format.HTML, plain))
    return failure


def _terminal_width(to_file: bool) -> int | None:
    """The columns to wrap at on a terminal (COLUMNS first); None, never wrap, elsewhere."""
    if to_file or not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def _mistyped_run(arguments: list[str]) -> str | None:
    """What to say when the first word is no file or folder but close to `run` (`runn`,
    `rnu`): a usage error, not a missing model beside a script that would then be run."""
    import difflib

    first = arguments[0] if arguments else ""
    if not first or first.startswith("-") or first == "run" or os.path.lexists(first):
        return None
    if not difflib.get_close_matches(first.lower(), ["run"], n=1, cutoff=0.6):
        return None
    meant = " ".join(["gradcheck run", *arguments[1:]])
    return (
        f"{escape_controls(first)}: no such file, folder or command; did you mean "
        f"`{escape_controls(meant)}`?"
    )


def main() -> None:
    """The `gradcheck` command: SIGINT exits 130 and SIGTERM 143, once every worker is gone."""
    if os.name != "posix" or not hasattr(os, "fork"):  # the worker forks, over Unix sockets
        click.echo(
            f"gradcheck: error: gradcheck runs on Linux and macOS, not on {sys.platform} "
            "(it forks its workers and talks to them over Unix sockets); on Windows, use WSL",
            err=True,
        )
        sys.exit(ExitCode.ERROR)
    stop_on_signals()
    # The models a command checks stay alive until their report, and leave next to no cyclic
    # garbage: the cyclic collector would walk every node of a large graph again and again
    # (and once more as the graph model is built and analysed) to find nothing. The workers,
    # and the script they run, are processes of their own, with their collector on.
    gc.disable()
    typo = _mistyped_run(sys.argv[1:])
    if typo is not None:  # before anything is imported or run
        click.echo(f"gradcheck: error: {typo}", err=True)
        sys.exit(ExitCode.ERROR)
    try:
        asks = sys.argv[2].partition("=")[0] if sys.argv[2:] else ""
        if sys.argv[1:2] == ["run"] and asks not in ("--version", "--explain"):
            run_command(args=sys.argv[2:], prog_name="gradcheck run")
        elif sys.argv[1:2] == ["run"]:  # `gradcheck run --explain GC101`: the same answer
            command(args=sys.argv[2:])
        else:
            command()
    except Stopped as stop:
        name = signal.Signals(int(stop.code or 0) - 128).name
        click.echo(f"gradcheck: interrupted by {name}", err=True)
        raise
    finally:
        # The process ends here: the interpreter's exit would collect garbage over every object
        # still alive (modules, classes, what the check left), which none of them needs.
        gc.freeze()
