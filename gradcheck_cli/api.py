"""The library entry points that the CLI, the pytest integration and users call."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.concerns import regularizer_only
from gradcheck_cli.analysis.verdicts import Analysis, Blocker, Status, Unreached, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.build import Context, build_findings
from gradcheck_cli.findings.fixes import variable_fix
from gradcheck_cli.findings.policy import apply_policy
from gradcheck_cli.findings.report import Disagreement, Report, SourceInfo, Verification
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.loaders.bundle import Bundle
from gradcheck_cli.options import CheckOptions, check_options, takes_check_options


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
    chosen = check_options("assert_no_dead_variables", {"loss": loss, **options})
    return require_no_dead(check_with(model, chosen, variables))


def require_no_dead(report: Report) -> Report:
    """`report`, or AssertionError with the terminal report if a trainable variable is dead."""
    if report.dead:
        raise AssertionError(readable_report(report))
    return report


def check_with(model: Any, options: CheckOptions, variables: Any = None) -> Report:
    """`check` with its options as one value (what the CLI and the pytest plugin call)."""
    return _with_allowed_dead(model_report(model, options, variables), options)


def model_report(model: Any, options: CheckOptions, variables: Any = None) -> Report:
    """The report on one model of any kind `check` takes, before `allow_dead` is applied."""
    if isinstance(model, (str, os.PathLike)):
        return _check_path(Path(model), options)
    if _is_keras_model(model):
        return _check_keras_model(model, options)
    if callable(model) or hasattr(model, "get_concrete_function"):
        if options.loss is not None:
            raise GradcheckError(
                f"loss={options.loss!r} names a loss inside a file; a function passed to check() "
                "is the loss itself"
            )
        return _check_function(model, variables, options)
    raise GradcheckError(
        f"cannot check a {type(model).__name__}: pass a path, a compiled keras.Model, a "
        "tf.function or a zero-argument function returning the loss"
    )


def readable_report(report: Report) -> str:
    """The terminal report without colour, as a test failure shows it."""
    from gradcheck_cli.reporters.terminal import TerminalOptions, render_terminal

    return render_terminal(report, TerminalOptions(color=False, width=100))


def _is_keras_model(value: Any) -> bool:
    # Whoever built a live Keras model has imported Keras: never import it here to find out.
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(value, keras.Model)


def _check_keras_model(model: Any, options: CheckOptions) -> Report:
    from gradcheck_cli.loaders.tf_worker import keras_model_bundle

    name = str(getattr(model, "name", None) or type(model).__name__)
    bundle = keras_model_bundle(model, options.loss, name, options.verify)
    source = SourceInfo(f"<keras.Model {name}>", "keras", bundle.loss_name)
    return report_from_bundle(
        bundle, source, options.verify, options.all_cuts, sum_loss=options.sum_loss
    )


def _check_path(path: Path, options: CheckOptions) -> Report:
    if not path.exists():
        raise GradcheckError(f"{path}: no such file or directory")
    from gradcheck_cli.loaders.saved_model import is_saved_model, load_saved_model

    verify, all_cuts = options.verify, options.all_cuts
    if is_saved_model(path):
        program, loss_name = load_saved_model(path, options.loss, sum_loss=options.sum_loss)
        tf1 = program.top == "graph"
        source = SourceInfo(str(path), "savedmodel-tf1" if tf1 else "savedmodel", loss_name)
        analysis = analyse(program, cuts_of_live=all_cuts)
        verification = (
            _verify_saved_model(path, loss_name, analysis.verdicts, options) if verify else None
        )
        context = Context(tuple(program.notes), verification, located=program.located)
        return _report(source, analysis, context)
    if path.is_dir():
        raise GradcheckError(f"{path} is a folder without saved_model.pb: not a SavedModel")
    if path.suffix in (".keras", ".h5"):
        kind = "keras"
        request = {"mode": "keras", "unsafe": options.unsafe_deserialization}
    elif path.suffix == ".py":
        kind = "script"
        request = {"mode": "script"}
    else:
        raise GradcheckError(
            f"{path} is neither a SavedModel directory, a Python script (.py) nor a Keras "
            "model file (.keras, .h5)"
        )
    request.update({"path": str(path.resolve()), "loss": options.loss, "verify": verify})
    bundle = _run_worker(request, options, timeout=options.timeout)
    source = SourceInfo(str(path), kind, bundle.loss_name)
    return report_from_bundle(bundle, source, verify, all_cuts, sum_loss=options.sum_loss)


def _run_worker(request: dict[str, Any], options: CheckOptions, timeout: float | None) -> Bundle:
    """Hand one request and the check's options to the TensorFlow worker process."""
    from gradcheck_cli.loaders.worker_process import run_worker

    # The request dict is the worker's input until it takes the CheckOptions itself.
    request = {**request, "debug": options.debug}
    # The worker still reads GRADCHECK_DEBUG (its tracebacks, TensorFlow's start-up log), so
    # `debug` also sets it for this one call; a debug the user exported is left alone.
    if not options.debug or os.environ.get("GRADCHECK_DEBUG"):
        return run_worker(request, timeout=timeout)
    os.environ["GRADCHECK_DEBUG"] = "1"
    try:
        return run_worker(request, timeout=timeout)
    finally:
        del os.environ["GRADCHECK_DEBUG"]


@takes_check_options(exclude={"loss"})
def check_function(function: Any, *, variables: Any = None, **options: Any) -> Report:
    """Analyse a live `tf.function` (or concrete function) in this process.

    `variables`: extra candidate variables (e.g. every variable of a model); the variables the
    function captures are always candidates. The function must take no arguments or have an
    `input_signature`. Takes the options of `check` but `loss`: the function is the loss.
    """
    chosen = check_options("check_function", options, exclude={"loss"})
    return _with_allowed_dead(_check_function(function, variables, chosen), chosen)


def _with_allowed_dead(report: Report, options: CheckOptions) -> Report:
    if not options.allow_dead:
        return report
    return apply_policy(report, allow_dead=dict(options.allow_dead))


def _check_function(function: Any, variables: Any, options: CheckOptions) -> Report:
    from gradcheck_cli.loaders import tf_verification, tf_worker, traced

    concrete = tf_worker.concrete_function(function, _name_of(function), Path("<function>"))
    loss_output = tf_worker.loss_output_index(concrete, _name_of(function))
    candidates = list(variables or ())
    keras_info = {}
    for variable in candidates:
        backing = getattr(variable, "value", None)
        if backing is not None and hasattr(variable, "path"):
            keras_info[id(backing)] = (variable.path, bool(variable.trainable))
    candidates = [getattr(v, "value", v) if hasattr(v, "path") else v for v in candidates]
    bundle = traced.bundle_from_concrete_function(
        concrete, _name_of(function), loss_output, candidates, keras_info=keras_info
    )
    if options.verify:
        ordered = traced.candidate_variables(candidates, concrete)
        bundle.tf_verdicts = tf_verification.tape_verdicts(
            lambda: tf_worker.flat_output(
                tf_verification.call_with_random_inputs(concrete, concrete), loss_output
            ),
            ordered,
            [r.name for r in bundle.variables],
        )
    source = SourceInfo("<function>", "function", bundle.loss_name)
    return report_from_bundle(
        bundle, source, options.verify, options.all_cuts, sum_loss=options.sum_loss
    )


def _name_of(function: Any) -> str:
    return str(getattr(function, "__name__", None) or getattr(function, "name", "loss"))


def report_from_bundle(
    bundle: Bundle,
    source: SourceInfo,
    verify: bool,
    all_cuts: bool = False,
    *,
    sum_loss: bool = False,
) -> Report:
    if bundle.kind == "eager":
        analysis = Analysis(_eager_verdicts(bundle))
        notes = list(bundle.notes)
    else:
        from gradcheck_cli.loaders.from_bundle import program_from_bundle

        program = program_from_bundle(bundle, sum_loss=sum_loss)
        analysis = analyse(program, cuts_of_live=all_cuts)
        notes = program.notes
        if bundle.data_only is not None:
            data_only = analyse(program_from_bundle(bundle.data_only, sum_loss=sum_loss))
            analysis = replace(
                analysis, concerns=analysis.concerns + regularizer_only(analysis, data_only)
            )
    verification = None
    if verify:
        verification = compare(
            analysis.verdicts, bundle.tf_verdicts, bundle.verify_error, bundle.verify_method
        )
    left = (bundle.eager.left_at, bundle.eager.reason) if bundle.eager is not None else None
    return _report(source, analysis, Context(tuple(notes), verification, left))


def _report(source: SourceInfo, analysis: Analysis, context: Context) -> Report:
    if not any(v.trainable for v in analysis.verdicts):
        raise GradcheckError(
            f"the loss {source.loss!r} has no trainable variable to check: the model has none, "
            "or the loss is computed from constants and inputs only"
        )
    lines = SourceLines()
    findings = build_findings(analysis, context, lines)
    locations = [f.location for f in findings]
    for verdict in analysis.verdicts:
        locations.append(verdict.location)
        locations += [b.location for b in verdict.blockers]
        locations += [step.location for step in verdict.route]
    code = {}
    for location in locations:
        text = lines.line(location)
        if location is not None and text is not None:
            code[(location.file, location.line)] = text
    fixes = {v.name: variable_fix(v, lines) for v in analysis.verdicts if v.dead}
    return Report(
        source=source,
        variables=analysis.verdicts,
        findings=findings,
        verification=context.verification,
        code=code,
        fixes=fixes,
    )


def _eager_verdicts(bundle: Bundle) -> tuple[VariableVerdict, ...]:
    eager = bundle.eager
    assert eager is not None
    verdicts = []
    for record in bundle.variables:
        outcome = eager.verdicts.get(record.name)
        blockers: tuple[Blocker, ...] = ()
        unreached = None
        if not record.trainable:
            status = Status.FROZEN
        elif outcome == "gradient":
            status = Status.OK
        elif outcome == "unread":
            status = Status.UNUSED
            unreached = Unreached.NEVER_READ
        else:
            status = Status.BLOCKED
            blockers = (
                Blocker(
                    op="<eager>",
                    op_type="LeavesTensorFlow",
                    reason=Reason.LEFT_TENSORFLOW,
                    message=(
                        "the value leaves TensorFlow here, so the gradient cannot follow "
                        f"({eager.reason})"
                    ),
                    location=eager.left_at,
                ),
            )
        verdicts.append(
            VariableVerdict(
                name=record.name,
                path=record.path,
                trainable=record.trainable,
                dtype=record.dtype,
                shape=record.shape,
                status=status,
                blockers=blockers,
                location=record.location,
                unreached=unreached,
            )
        )
    return tuple(verdicts)


def _verify_saved_model(
    path: Path, loss_name: str, verdicts: tuple[VariableVerdict, ...], options: CheckOptions
) -> Verification:
    try:
        bundle = _run_worker(
            {"mode": "savedmodel", "path": str(path.resolve()), "loss": loss_name, "verify": True},
            options,
            timeout=None,  # the default: --timeout bounds loading a script or a Keras file
        )
    except GradcheckError as error:
        return Verification(method="tf.saved_model.load + tf.GradientTape", error=str(error))
    return compare(
        verdicts, bundle.tf_verdicts, bundle.verify_error, "tf.saved_model.load + tf.GradientTape"
    )


def compare(
    verdicts: tuple[VariableVerdict, ...],
    tensorflow: Mapping[str, str] | None,
    error: str | None,
    method: str,
) -> Verification:
    """Where gradcheck's dead/alive verdicts differ from TensorFlow's own gradients."""
    if tensorflow is None:
        return Verification(method=method, error=error or "TensorFlow gave no verdict")
    disagreements = []
    for verdict in verdicts:
        if verdict.status is Status.FROZEN or verdict.name not in tensorflow:
            continue
        tf_dead = tensorflow[verdict.name] in ("none", "zero", "unread")
        if tf_dead != verdict.dead:
            disagreements.append(
                Disagreement(verdict.name, verdict.status.value, tensorflow[verdict.name])
            )
    return Verification(method=method, disagreements=tuple(disagreements), error=error)
