"""The library entry points that the CLI, the pytest integration and users call."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.policy import apply_policy
from gradcheck_cli.findings.report import Report
from gradcheck_cli.options import CheckOptions, check_options, takes_check_options
from gradcheck_cli.pipeline import check_live_function, check_live_keras_model, check_path
from gradcheck_cli.pipeline import check_run as run_pipeline


@takes_check_options()
def check(model: Any, loss: str | None = None, *, variables: Any = None, **options: Any) -> Report:
    """Analyse a model and return the report.

    `model` is a path (str or PathLike, relative to the working directory) to a SavedModel
    directory, a Python script or a Keras model file; or, in this process, a compiled
    `keras.Model` (its own objective: compiled losses plus `model.losses`; `loss` may name a
    Keras loss instead), a `tf.function`, a concrete function or a zero-argument callable
    returning the loss (`variables`: extra candidates, as in `check_function`).

    Raises GradcheckError when the input cannot be analysed, TypeError for an unknown option.
    """
    return check_with(model, check_options("check", {"loss": loss, **options}), variables)


@takes_check_options()
def assert_no_dead_variables(
    model: Any, loss: str | None = None, *, variables: Any = None, **options: Any
) -> Report:
    """`check`, then raise AssertionError with the terminal report if a variable is dead.

    Takes the same options as `check`. Returns the report when every trainable variable can
    train (or is allowed dead).
    """
    __tracebackhide__ = True  # a failing test shows the report, not gradcheck's own frames
    chosen = check_options("assert_no_dead_variables", {"loss": loss, **options})
    return require_no_dead(check_with(model, chosen, variables))


def require_no_dead(report: Report) -> Report:
    """`report`, or AssertionError with the terminal report if a trainable variable is dead."""
    __tracebackhide__ = True
    if report.dead:
        raise AssertionError(readable_report(report))
    return report


def check_with(
    model: Any,
    options: CheckOptions,
    variables: Any = None,
    sources: tuple[tuple[str, str], ...] = (),
) -> Report:
    """`check` with its options as one value (what the CLI and the pytest plugin call);
    `sources`: (path, text) of files a script is run as if they held that text."""
    return _with_allowed_dead(model_report(model, options, variables, sources), options)


def model_report(
    model: Any,
    options: CheckOptions,
    variables: Any = None,
    sources: tuple[tuple[str, str], ...] = (),
) -> Report:
    """The report on one model of any kind `check` takes, before `allow_dead` is applied."""
    if isinstance(model, (str, os.PathLike)):
        return check_path(Path(model), options, sources)
    # Imported only for a live object: a check of a path needs none of the tracing code.
    from gradcheck_cli.tracing.keras_models import is_keras_model

    if is_keras_model(model):
        return check_live_keras_model(model, options)
    if callable(model) or hasattr(model, "get_concrete_function"):
        if options.loss is not None:
            raise GradcheckError(
                f"loss={options.loss!r} names a loss inside a file; a function passed to check() "
                "is the loss itself"
            )
        return check_live_function(model, variables, options)
    raise GradcheckError(
        f"cannot check a {type(model).__name__}: pass a path, a compiled keras.Model, a "
        "tf.function or a zero-argument function returning the loss"
    )


def readable_report(report: Report) -> str:
    """The terminal report without colour, as a test failure shows it."""
    from gradcheck_cli.reporters import TerminalOptions
    from gradcheck_cli.reporters.terminal import render_terminal

    return render_terminal(report, TerminalOptions(color=False, width=100))


@takes_check_options(exclude={"loss"})
def check_function(function: Any, *, variables: Any = None, **options: Any) -> Report:
    """Analyse a live `tf.function` (or concrete function) in this process.

    `variables`: extra candidate variables (e.g. every variable of a model); the variables the
    function captures are always candidates. The function must take no arguments or have an
    `input_signature`. Takes the options of `check` but `loss`: the function is the loss.
    """
    chosen = check_options("check_function", options, exclude={"loss"})
    return _with_allowed_dead(check_live_function(function, variables, chosen), chosen)


def _with_allowed_dead(report: Report, options: CheckOptions) -> Report:
    if not options.allow_dead:
        return report
    return apply_policy(report, allow_dead=dict(options.allow_dead))


@takes_check_options(exclude={"loss", "sum_loss"})
def check_script_run(
    script: str | os.PathLike[str], arguments: Sequence[str] = (), **options: Any
) -> list[Report]:
    """Run a training script (or notebook) as `python SCRIPT ARGUMENTS...` would, in a separate
    process, and stop it before its first training step changes a weight: one report per
    gradient request, each judged on the variables that request differentiates.

    Takes the options of `check` but `loss` and `sum_loss`: the script's own requests name them.
    Raises GradcheckError if the script fails or never asks for gradients within `timeout`.
    """
    chosen = check_options("check_script_run", options, exclude={"loss", "sum_loss"})
    return check_run(Path(script), tuple(arguments), chosen)


def check_run(
    script: Path,
    arguments: tuple[str, ...],
    options: CheckOptions,
    *,
    run_on: bool = False,
    on_reports: Callable[[list[Report]], None] | None = None,
    sources: tuple[tuple[str, str], ...] = (),
) -> list[Report]:
    """`check_script_run` with its options as one value (what the CLI calls)."""

    def allowed(reports: list[Report]) -> list[Report]:
        return [_with_allowed_dead(report, options) for report in reports]

    early = None
    if on_reports is not None:

        def early(reports: list[Report]) -> None:
            on_reports(allowed(reports))

    reports = run_pipeline(
        script, arguments, options, run_on=run_on, on_reports=early, sources=sources
    )
    return allowed(reports)
