"""Check many models in one run: each with its options, then the run's policy; the exit code."""

from __future__ import annotations

import enum
import json
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gradcheck_cli.config import MAX_NESTING, document_problem, os_error_reason, read_text_file
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.file_writes import write_file
from gradcheck_cli.findings.names import sharing_last_part, variables_named
from gradcheck_cli.findings.policy import FailOn
from gradcheck_cli.findings.report import Report
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.worker.process_tree import ProcessTree, Stopped, stop_on_sigterm_only

BASELINE_SCHEMA = "gradcheck-baseline/1"
BASELINE_LIMIT = 16 << 20  # bytes: 16 MiB holds hundreds of thousands of variable names
_POOL_GRACE_SECONDS = 5.0


class ExitCode(enum.IntEnum):
    CLEAN = 0
    DEAD_VARIABLES = 1
    ERROR = 2


@dataclass(frozen=True)
class ModelCheck:
    """One model to check and how (its loss and allowed dead variables included)."""

    model: str
    options: CheckOptions = CheckOptions()
    # (path, text) of files the model's script is run as if they held that text (`--fix`).
    sources: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Policy:
    """What the run applies to every report after the check (see `apply_policy`): the codes
    selected and ignored, and a baseline file of already-dead variables, if any."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    baseline: Path | None = None


@dataclass(frozen=True)
class Outcome:
    """One model's result: a report, or the reason it could not be analysed."""

    model: str
    report: Report | None = None
    error: str | None = None
    internal: bool = False  # a gradcheck bug rather than bad input
    trace: str | None = field(default=None, repr=False)

    @property
    def message(self) -> str:
        """The one line that goes to stderr when the model could not be analysed."""
        if not self.internal:
            return f"gradcheck: error: {self.error}"
        return f"gradcheck: internal error: {self.error} (run with --debug for the traceback)"


def check_models(
    checks: Sequence[ModelCheck], policy: Policy = Policy(), jobs: int = 1
) -> list[Outcome]:
    """Check every model (in `jobs` processes when > 1), apply `policy`; in argument order.

    A model that cannot be analysed becomes an Outcome with an error; the others still run.
    """
    processes = min(jobs, len(checks), available_cpus())
    if processes > 1:
        outcomes = _check_in_pool(checks, processes)
    else:
        outcomes = [check_model(item) for item in checks]
    known = read_baseline(policy.baseline) if policy.baseline is not None else {}
    return [_with_policy(outcome, policy, known) for outcome in outcomes]


def available_cpus() -> int:
    """The CPUs this process may run on: more processes than that only compete for them, each
    with TensorFlow's memory."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _check_in_pool(checks: Sequence[ModelCheck], processes: int) -> list[Outcome]:
    """Check the models in a pool of processes; if anything stops the wait (Ctrl-C, SIGTERM),
    the pool and every process it started end before the exception goes on."""
    # Imported here: one model, the usual case, needs no pool.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    tree = ProcessTree()
    # spawn, not fork: forking a process that may hold threads is unsafe.
    pool = ProcessPoolExecutor(
        processes,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_join_pool,
        initargs=(tree,),
    )
    try:
        outcomes = list(pool.map(_check_in_pool_process, checks))
    except BaseException:
        # The executor keeps its processes private; they are our own unreaped children.
        started = list(pool._processes or {})
        pool.shutdown(wait=False, cancel_futures=True)
        # SIGTERM lets each one end its worker's tree and remove its scratch folder.
        tree.end(started, grace=_POOL_GRACE_SECONDS)
        raise
    pool.shutdown()
    return outcomes


def _join_pool(tree: ProcessTree) -> None:
    stop_on_sigterm_only()
    tree.enter()


def _check_in_pool_process(item: ModelCheck) -> Outcome:
    try:
        return check_model(item)
    except Stopped as stop:
        # The worker's cleanup has run; the executor would only wait for more work.
        os._exit(int(stop.code or 0))


def check_model(item: ModelCheck) -> Outcome:
    """Check one model; every failure becomes an Outcome (this runs in worker processes too)."""
    from gradcheck_cli import api

    try:
        report = api.check_with(item.model, item.options, sources=item.sources)
    except Exception as error:
        return _failed(item.model, error)
    return Outcome(item.model, report=report)


def _failed(model: str, error: Exception) -> Outcome:
    """The Outcome of a model that could not be analysed: bad input, or a gradcheck bug (reported
    with its traceback, exit code 2 all the same). Called inside the `except` that caught it."""
    if isinstance(error, GradcheckError):
        return Outcome(model, error=str(error))
    return Outcome(
        model,
        error=f"{type(error).__name__}: {error}",
        internal=True,
        trace=traceback.format_exc(),
    )


def check_script(
    script: str,
    arguments: tuple[str, ...],
    options: CheckOptions,
    policy: Policy = Policy(),
    *,
    run_on: bool = False,
    on_outcomes: Callable[[list[Outcome]], None] | None = None,
    sources: tuple[tuple[str, str], ...] = (),
) -> list[Outcome]:
    """Run a training script to its first step: one Outcome per gradient request, the policy
    applied; one failed Outcome if the script fails or never asks for gradients.

    With `run_on` the script trains on, and `on_outcomes` gets the outcomes meanwhile.
    """
    from gradcheck_cli import api

    known = read_baseline(policy.baseline) if policy.baseline is not None else {}

    def outcomes(reports: list[Report]) -> list[Outcome]:
        return [_with_policy(Outcome(script, report=r), policy, known) for r in reports]

    early = None
    if on_outcomes is not None:

        def early(reports: list[Report]) -> None:
            on_outcomes(outcomes(reports))

    try:
        reports = api.check_run(
            Path(script), arguments, options, run_on=run_on, on_reports=early, sources=sources
        )
    except Exception as error:
        return [_failed(script, error)]
    return outcomes(reports)


def _with_policy(
    outcome: Outcome, policy: Policy, baseline: Mapping[str, frozenset[str]]
) -> Outcome:
    from gradcheck_cli.findings.policy import apply_policy

    if outcome.report is None:
        return outcome
    report = apply_policy(
        outcome.report,
        baseline=(
            baseline.get(_key(outcome.model), frozenset()) if policy.baseline is not None else None
        ),
        select=policy.select,
        ignore=policy.ignore,
    )
    return Outcome(outcome.model, report=report)


def exit_code(outcomes: Iterable[Outcome], fail_on: FailOn, exit_zero: bool = False) -> ExitCode:
    """The run's exit code: 2 if any model could not be analysed (never hidden), else 1 if a
    finding at or above `fail_on` is left after the policy (unless `exit_zero`), else 0."""
    outcomes = list(outcomes)
    if any(outcome.report is None for outcome in outcomes):
        return ExitCode.ERROR
    if exit_zero:
        return ExitCode.CLEAN
    for outcome in outcomes:
        assert outcome.report is not None
        if any(item.severity in fail_on.severities for item in outcome.report.findings):
            return ExitCode.DEAD_VARIABLES
    return ExitCode.CLEAN


def missing_variable(reports: Sequence[Report], name: str) -> str | None:
    """The error line when no report has a variable called `name` (for --why), else None."""
    if any(variables_named(report.variables, name, report.python_name) for report in reports):
        return None
    sharing = sorted(
        {v.name for report in reports for v in sharing_last_part(report.variables, name)}
    )
    if len(sharing) > 1:
        return (
            f"gradcheck: error: {len(sharing)} variables have names ending in {name!r}; "
            f"name one: {', '.join(sharing)}"
        )
    names = ", ".join(v.name for report in reports for v in report.variables[:12])
    return f"gradcheck: error: no variable named {name!r}; variables: {names}"


def read_baseline(path: Path) -> dict[str, frozenset[str]]:
    """Dead variables per model (keyed by absolute model path) from a baseline file."""
    text = read_text_file(path, BASELINE_LIMIT, "baseline")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise GradcheckError(f"{path}: the baseline is not valid JSON: {error}") from None
    except RecursionError:
        # As the walk below tells it, whichever comes first (the recursion limit varies).
        raise GradcheckError(
            f"{path}: the baseline has nested more than {MAX_NESTING} levels deep"
        ) from None
    problem = document_problem(document)
    if problem is not None:
        raise GradcheckError(f"{path}: the baseline has {problem}")
    if not isinstance(document, dict) or document.get("schema") != BASELINE_SCHEMA:
        raise GradcheckError(f"{path}: not a gradcheck baseline (schema {BASELINE_SCHEMA})")
    models = document.get("models")
    if not isinstance(models, dict):
        raise GradcheckError(f"{path}: not a gradcheck baseline (schema {BASELINE_SCHEMA})")
    for model, names in models.items():
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise GradcheckError(
                f"{path}: the baseline's entry for {model!r} must be a list of variable names"
            )
    folder = path.resolve().parent
    return {_key(folder / model): frozenset(names) for model, names in models.items()}


def write_baseline(path: Path, outcomes: Sequence[Outcome]) -> str:
    """Write today's dead variables of every checked model; return the line to tell the user.

    Model paths are stored relative to the baseline's folder, so the file works from any
    working directory and on any machine that checks out the same tree.
    """
    folder = path.resolve().parent
    models: dict[str, list[str]] = {}
    for outcome in outcomes:
        assert outcome.report is not None
        relative = os.path.relpath(_key(outcome.model), folder)
        # `gradcheck run` gives one outcome per gradient request of the same script.
        names = models.setdefault(Path(relative).as_posix(), [])
        names[:] = sorted(set(names) | {v.name for v in outcome.report.dead})
    document = {"schema": BASELINE_SCHEMA, "models": dict(sorted(models.items()))}
    try:
        write_file(path, json.dumps(document, indent=2) + "\n")
    except OSError as error:
        raise GradcheckError(f"cannot write {path}: {os_error_reason(error)}") from None
    count = sum(len(names) for names in models.values())
    having = sum(1 for names in models.values() if names)
    dead = f"{count} dead variable{'' if count == 1 else 's'}"
    checked = f"{len(models)} model{'' if len(models) == 1 else 's'}"
    if having == len(models):
        return f"gradcheck: wrote {path}: {dead} in {checked}"
    return f"gradcheck: wrote {path}: {dead} in {having} of {checked}"


def _key(model: str | os.PathLike[str]) -> str:
    return os.path.normpath(Path(model).resolve())
