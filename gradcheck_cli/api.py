"""The library entry points that the CLI, the pytest integration and users call."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.policy import apply_policy
from gradcheck_cli.findings.report import Report
from gradcheck_cli.loaders.keras_models import is_keras_model
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.pipeline import check_live_function, check_live_keras_model, check_path


def check(
    model: Any,
    loss: str | None = None,
    *,
    allow_dead: Mapping[str, str] | Iterable[str] = (),
    verify: bool = False,
    all_cuts: bool = False,
    unsafe_deserialization: bool = False,
    variables: Any = None,
    sum_loss: bool = False,
    timeout: float | None = None,
) -> Report:
    """Analyse a model and return the report.

    `model` is a path (str or PathLike, relative to the working directory) to a SavedModel
    directory, a Python script or a Keras model file; or, in this process, a compiled
    `keras.Model` (its own objective: compiled losses plus `model.losses`; `loss` may name a
    Keras loss instead), a `tf.function`, a concrete function or a zero-argument callable
    returning the loss (`variables`: extra candidates, as in `check_function`).

    `allow_dead`: glob patterns of variable names (or pattern -> reason) that may be dead; they
    are reported as allowed and left out of `Report.dead`.

    `unsafe_deserialization`: let Keras run Python code stored in a `.keras` file (Lambda layers).

    `all_cuts`: also name the cuts on the other paths of variables that do train (GC204).

    Raises GradcheckError when the input cannot be analysed.
    """
    if isinstance(model, (str, os.PathLike)):
        report = _check_path(
            Path(model),
            loss,
            _PathOptions(verify, all_cuts, unsafe_deserialization, sum_loss, timeout),
        )
    elif is_keras_model(model):
        report = _check_keras_model(model, loss, verify, all_cuts)
    elif callable(model) or hasattr(model, "get_concrete_function"):
        if loss is not None:
            raise GradcheckError(
                f"loss={loss!r} names a loss inside a file; a function passed to check() is the "
                "loss itself"
            )
        report = check_function(model, variables=variables, verify=verify, all_cuts=all_cuts)
    else:
        raise GradcheckError(
            f"cannot check a {type(model).__name__}: pass a path, a compiled keras.Model, a "
            "tf.function or a zero-argument function returning the loss"
        )
    return apply_policy(report, allow_dead=allow_dead) if allow_dead else report


def assert_no_dead_variables(
    model: Any,
    loss: str | None = None,
    *,
    allow_dead: Mapping[str, str] | Iterable[str] = (),
    verify: bool = False,
    all_cuts: bool = False,
    unsafe_deserialization: bool = False,
    variables: Any = None,
) -> Report:
    """`check`, then raise AssertionError with the terminal report if a variable is dead.

    Returns the report when every trainable variable can train (or is allowed dead).
    """
    report = check(
        model,
        loss,
        allow_dead=allow_dead,
        verify=verify,
        all_cuts=all_cuts,
        unsafe_deserialization=unsafe_deserialization,
        variables=variables,
    )
    if report.dead:
        raise AssertionError(readable_report(report))
    return report


def readable_report(report: Report) -> str:
    """The terminal report without colour, as a test failure shows it."""
    from gradcheck_cli.reporters.terminal import TerminalOptions, render_terminal

    return render_terminal(report, TerminalOptions(color=False, width=100))


def _check_keras_model(model: Any, loss: str | None, verify: bool, all_cuts: bool) -> Report:
    return check_live_keras_model(model, CheckOptions(loss=loss, verify=verify, all_cuts=all_cuts))


@dataclass(frozen=True)
class _PathOptions:
    verify: bool = False
    all_cuts: bool = False
    unsafe_deserialization: bool = False
    sum_loss: bool = False  # check the sum of a loss that is not a scalar
    timeout: float | None = None  # seconds a script or Keras file may take in the worker


def _check_path(path: Path, loss: str | None, options: _PathOptions) -> Report:
    return check_path(
        path,
        CheckOptions(
            loss=loss,
            verify=options.verify,
            all_cuts=options.all_cuts,
            unsafe_deserialization=options.unsafe_deserialization,
            sum_loss=options.sum_loss,
            timeout=options.timeout,
            # `gradcheck --debug` sets GRADCHECK_DEBUG (cli.run).
            debug=bool(os.environ.get("GRADCHECK_DEBUG")),
        ),
    )


def check_function(
    function: Any, *, variables: Any = None, verify: bool = False, all_cuts: bool = False
) -> Report:
    """Analyse a live `tf.function` (or concrete function) in this process.

    `variables`: extra candidate variables (e.g. every variable of a model); the variables the
    function captures are always candidates. The function must take no arguments or have an
    `input_signature`.
    """
    return check_live_function(function, variables, CheckOptions(verify=verify, all_cuts=all_cuts))
