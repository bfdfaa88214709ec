"""Run one check from model to report: load, analyse, compare with TensorFlow, build findings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.eager import eager_verdicts
from gradcheck_cli.analysis.model_map import model_map
from gradcheck_cli.analysis.verdicts import Analysis, Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import UNSEEN_EAGER_CUT
from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.findings.build import Context, build_findings, finding_order
from gradcheck_cli.findings.explanation import explain
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.intent import judge_intent, trained_elsewhere
from gradcheck_cli.findings.report import Report, RequestInfo, SourceInfo, Verification
from gradcheck_cli.findings.source import SourceLines, created_name
from gradcheck_cli.findings.suppressions import apply_ignore_comments
from gradcheck_cli.findings.verification import compare
from gradcheck_cli.graph.model import GraphKind, TensorFlowVerdict
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.traced_analysis import EarlyAnalyses, by_tape, traced_analysis
from gradcheck_cli.worker.progress import Steps

# The worker's messages are imported where a traced result is handled: a SavedModel is read
# here, and its check loads none of the script, worker or TensorFlow-side machinery.
if TYPE_CHECKING:
    from gradcheck_cli.worker.protocol import (
        EagerResult,
        RunResult,
        TensorFlowGradients,
        Traced,
        TracedGraph,
        WorkerResult,
    )


def check_path(
    path: Path, options: CheckOptions, sources: tuple[tuple[str, str], ...] = ()
) -> Report:
    """A SavedModel directory (read here), or a script or Keras file (traced in the worker).

    `sources`: (path, text) of files the script is run as if they held that text (a fix
    checked before it is written; never cached)."""
    if not path.exists():
        raise GradcheckError(f"{path}: no such file or directory")
    from gradcheck_cli.savedmodel.loading import compiled_by_keras_2, is_saved_model

    if is_saved_model(path):
        # A compiled Keras 2 model saved as a SavedModel is checked on its compiled objective,
        # as its .h5 or .keras file is, unless a function of the SavedModel is named.
        if options.loss is not None or not compiled_by_keras_2(path):
            return _saved_model_report(path, options)
        kind = "keras"
    else:
        kind = _file_kind(path)
        if kind == "keras":
            from gradcheck_cli.source_code.keras_archive import check_keras_archive

            check_keras_archive(path)
    from gradcheck_cli.cache.script_cache import tell_cached, traced
    from gradcheck_cli.worker.protocol import (
        EagerResult,
        Job,
        TracedFunction,
        TracedGraph,
        WorkerRequest,
    )

    if kind == "script":
        refuse_unparsable(path, sources)
    job = Job.SCRIPT if kind == "script" else Job.KERAS_FILE
    request = WorkerRequest(job, path.resolve(), options, sources=sources)
    result, cached = traced(request)
    assert isinstance(result, (TracedFunction, TracedGraph, EagerResult))
    source = SourceInfo(str(path), kind, result.loss_name)
    report = report_from_result(result, source, options, Context(texts=sources))
    if cached:  # only once the answer made a report: a refusal of it is one line
        tell_cached(request)
    return report


def _saved_model_report(path: Path, options: CheckOptions) -> Report:
    from gradcheck_cli.savedmodel.loading import load_saved_model

    with Steps(options.progress) as steps:  # each step shown on stderr as it goes
        program, loss_name = load_saved_model(
            path, options.loss, sum_loss=options.sum_loss, progress=steps
        )
        tf1 = program.kind is GraphKind.TF1_GRAPH
        source = SourceInfo(str(path), "savedmodel-tf1" if tf1 else "savedmodel", loss_name)
        analysis = analyse(program, cuts_of_live=options.all_cuts, progress=steps)
        if options.model_map:
            analysis = replace(analysis, model_map=model_map(program, analysis.verdicts))
        verification = None
        if options.verify:
            steps("asking TensorFlow for its own gradients (--verify)")
            with steps.aside():  # the worker shows its own status on a terminal
                verification = _verify_saved_model(path, loss_name, analysis.verdicts, options)
        context = Context(tuple(program.notes), verification, located=program.located)
        steps("building the findings")
        return _report(source, analysis, context)


def refuse_unparsable(path: Path, sources: tuple[tuple[str, str], ...] = ()) -> None:
    """A script Python cannot parse, refused in one line before anything imports TensorFlow
    (or runs a line of it)."""
    from gradcheck_cli.source_code.files import bounded_text

    given = dict(sources)  # a fix checked before it is written: the fixed text
    text = given.get(str(path.resolve()), given.get(str(path))) or bounded_text(str(path))
    if text is None:  # unreadable here: the worker says why
        return
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        at = f":{error.lineno}" if error.lineno else ""
        raise GradcheckError(
            f"{display_path(path)}{at}: {error.msg}: Python cannot parse the script "
            "(SyntaxError), so gradcheck ran none of it"
        ) from None
    except ValueError as error:  # a NUL byte
        raise GradcheckError(f"{display_path(path)}: {error}") from None


def _file_kind(path: Path) -> str:
    """The kind of a MODEL that is a file (MODEL_FILE_KINDS); one error line for any other."""
    if path.is_dir():
        raise GradcheckError(f"{path} is a folder without saved_model.pb: not a SavedModel")
    if not path.is_file():  # a FIFO or a device would block or never end
        raise GradcheckError(f"{path} is not a regular file")
    kind = MODEL_FILE_KINDS.get(path.suffix)
    if kind is None:
        raise GradcheckError(
            f"{path} is neither a SavedModel directory, a Python script (.py) nor a Keras "
            "model file (.keras, .h5)"
        )
    return kind


MODEL_FILE_KINDS = {".py": "script", ".keras": "keras", ".h5": "keras"}
"""A MODEL file's kind by its suffix (a SavedModel is a folder)."""

RUN_SUFFIXES = (".py", ".ipynb")


def check_run(
    path: Path,
    arguments: tuple[str, ...],
    options: CheckOptions,
    *,
    run_on: bool = False,
    on_reports: Callable[[list[Report]], None] | None = None,
    sources: tuple[tuple[str, str], ...] = (),
) -> list[Report]:
    """Run a training script or notebook up to its first training step: one report per
    gradient request, each judged on the variables that request differentiates.

    With `run_on`, the script goes on after its step is checked; `on_reports` then gets the
    reports as soon as they are known, while the script still runs. `sources`: as for
    `check_path`.
    """
    if not path.is_file():
        what = "a folder" if path.is_dir() else "not a regular file" if path.exists() else None
        raise GradcheckError(
            f"{path}: {what or 'no such file'}; gradcheck run takes a Python script or a notebook"
        )
    if path.suffix not in RUN_SUFFIXES:
        raise GradcheckError(
            f"{path} is neither a Python script (.py) nor a notebook (.ipynb); for a SavedModel "
            "or a Keras file use `gradcheck MODEL`"
        )
    if path.suffix == ".py":
        refuse_unparsable(path, sources)
    from gradcheck_cli.worker.process import run_worker
    from gradcheck_cli.worker.protocol import Job, RunResult, WorkerRequest

    request = WorkerRequest(Job.RUN, path.resolve(), options, arguments, run_on, sources=sources)
    run_options = replace(options, sum_loss=True)  # TensorFlow sums a non-scalar target
    analysed = EarlyAnalyses(run_options)  # each graph request, while the script goes on

    early: list[list[Report]] = []  # analysed once, when the running script delivered them
    callback = None
    if on_reports is not None:

        def callback(result: WorkerResult) -> None:
            assert isinstance(result, RunResult)
            early.append(run_reports(str(path), result, run_options, sources, analysed))
            on_reports(early[0])

    result = run_worker(request, callback, analysed.add)
    assert isinstance(result, RunResult)
    return early[0] if early else run_reports(str(path), result, run_options, sources, analysed)


def run_reports(
    path: str,
    result: RunResult,
    options: CheckOptions,
    texts: tuple[tuple[str, str], ...] = (),
    early: EarlyAnalyses | None = None,
) -> list[Report]:
    """One report per gradient request of a run (`path`: the script, as the reports name it),
    in the order the program asked; `gradcheck run` and `watch()` alike. `texts`: as
    `check_path`'s `sources`; `early`: requests analysed while the script ran."""
    untrained = [v.name for v in result.untrained]
    # A variable no request lists, that a request's loss reads and would train (a codebook
    # left out of the list), is told with that request (GC213); the rest with the first
    # request (GC207), which is therefore built last. Where the script holds requests the run
    # stopped before (a GAN's generator step after its critic's), a later one may train it:
    # told as what is known (GC207), never as the mistake.
    told: set[str] = set()
    fixed = set(result.fixed)
    unreached = tuple(result.unreached)
    reports: dict[int, Report] = {}
    order = list(range(1, len(result.requests))) + [0]
    for index in order:
        request = result.requests[index]
        read = set(getattr(request.result, "context_variables", ()))
        info = RequestInfo(request.api, request.location)
        where = request.location
        label = f"{request.api} at {display_path(where.file)}:{where.line}" if where else None
        source = SourceInfo(path, "run", label or request.api, info)
        extra = Context(
            requested=True,
            never_requested=tuple(n for n in untrained if n not in told) if index == 0 else (),
            unreached=unreached if index == 0 else (),
            idle_training=tuple(result.idle) if index == 0 else (),
            left_out=tuple(result.left_out) if index == 0 else (),
            copies=tuple(result.copies) if index == 0 else (),
            read_not_requested=()
            if unreached
            else tuple(n for n in untrained if n in read and n not in told | fixed),
            texts=texts,
        )
        report = report_from_result(request.result, source, options, extra, early)
        told.update(report.read_not_requested)
        reports[index] = report
    return trained_elsewhere([reports[index] for index in range(len(result.requests))])


def check_live_keras_model(model: Any, options: CheckOptions) -> Report:
    """A compiled keras.Model's own objective, traced in this process."""
    from gradcheck_cli.tracing.keras_models import trace_live_keras_model

    name = str(getattr(model, "name", None) or type(model).__name__)
    result = trace_live_keras_model(model, options.loss, name, options.verify)
    source = SourceInfo(f"<keras.Model {name}>", "keras", result.loss_name)
    return report_from_result(result, source, options)


def check_live_function(function: Any, variables: Any, options: CheckOptions) -> Report:
    """A tf.function, concrete function or zero-argument loss function, traced in this process."""
    from gradcheck_cli.tracing.function_tracing import trace_live_function

    result = trace_live_function(function, variables, verify=options.verify)
    source = SourceInfo("<function>", "function", result.loss_name)
    return report_from_result(result, source, options)


def report_from_result(
    result: Traced | EagerResult,
    source: SourceInfo,
    options: CheckOptions,
    run: Context | None = None,
    early: EarlyAnalyses | None = None,
) -> Report:
    """Analyse what the tracer brought back (or take the eager tape's verdicts) and report.
    `early`: what was analysed of a run while its script ran."""
    from gradcheck_cli.worker.protocol import (
        EagerResult,
        TensorFlowGradients,
        TracedFunction,
        TracedGraph,
    )

    if isinstance(result, TracedGraph) and result.eager_fallback is not None:
        return _eager_step_report(result, result.eager_fallback, source, options, run, early)
    if isinstance(result, EagerResult) and source.kind == "run":
        source = source.read_as(EAGER_VERDICT_ONLY)
    left = None
    if isinstance(result, EagerResult):
        verdicts = eager_verdicts(result.variables, result.gradients, result.left_at, result.reason)
        analysis = Analysis(verdicts)
        notes: list[str] = []
        unseen = result.left_at is None and result.reason == UNSEEN_EAGER_CUT
        left = None if unseen else (result.left_at, result.reason)  # no GC109 for nothing seen
    else:
        analyses = early.analysis if early is not None else traced_analysis
        analysis, notes = analyses(result, options)
        if isinstance(result, TracedFunction):
            for tape in result.other_tapes:
                more, more_notes = analyses(tape, options)
                analysis = by_tape(analysis, more)
                notes += [note for note in more_notes if note not in notes]
            if result.untrained:
                never = (run.never_requested if run else ()) + result.untrained
                run = replace(run or Context(), never_requested=never)
    if run is not None and run.read_not_requested:
        # Told as read but not requested only where this loss would train them.
        live = tuple(n for n in run.read_not_requested if n in analysis.trainable_context)
        never = tuple(n for n in run.never_requested if n not in live)
        run = replace(run, read_not_requested=live, never_requested=never)
    verification = None
    if options.verify:
        from gradcheck_cli.tracing.tf_verification import TAPE

        tensorflow = _tape_gradients(result) or TensorFlowGradients(TAPE)
        verification = compare(
            analysis.verdicts, tensorflow.verdicts, tensorflow.error, tensorflow.method
        )
    context = replace(
        run or Context(), notes=tuple(notes), verification=verification, left_tensorflow=left
    )
    if not isinstance(result, EagerResult) and result.left_out:
        context = replace(context, left_out=context.left_out + tuple(result.left_out))
    return _report(source, analysis, context)


def _tape_gradients(result: Traced | EagerResult) -> TensorFlowGradients | None:
    """TensorFlow's verdicts, per variable from the tape that differentiates it."""
    from gradcheck_cli.worker.protocol import TracedFunction

    if not isinstance(result, TracedFunction) or result.tape_variables is None:
        return result.tensorflow
    verdicts: dict[str, TensorFlowVerdict] = {}
    for tape in [result, *result.other_tapes]:
        if tape.tensorflow is None or tape.tensorflow.verdicts is None:
            return tape.tensorflow
        for name in tape.tape_variables or ():
            answer = tape.tensorflow.verdicts.get(name)
            if answer is not None and verdicts.get(name) is not TensorFlowVerdict.GRADIENT:
                verdicts[name] = answer
    return replace(result.tensorflow, verdicts=verdicts)


EAGER_RECONSTRUCTED = "eager step: reconstructed from the ops TensorFlow ran"
EAGER_VERDICT_ONLY = "eager step: TensorFlow's verdict only, no graph"


def _eager_step_report(
    result: TracedGraph,
    eager: EagerResult,
    source: SourceInfo,
    options: CheckOptions,
    run: Context | None,
    early: EarlyAnalyses | None,
) -> Report:
    """The rebuilt graph's story where it agrees with TensorFlow's eager verdicts, else the
    eager verdicts alone (with where a value left TensorFlow)."""
    rebuilt = replace(result, eager_fallback=None)
    tagged = source.read_as(EAGER_RECONSTRUCTED)
    try:
        report = report_from_result(rebuilt, tagged, options, run, early)
    except GradcheckError:
        return report_from_result(eager, source, options, run)
    agreement = compare(report.variables, eager.gradients, None, EAGER_RECONSTRUCTED)
    # A value that went through NumPy cuts the recorded dataflow: the graph then finds the
    # variable unused where TensorFlow saw it read; the eager story names the line.
    left_tensorflow = eager.left_at is not None and any(
        v.status is Status.UNUSED and eager.gradients.get(v.name) is TensorFlowVerdict.NONE
        for v in report.variables
    )
    # A gradient of zeros in this step agrees with a graph that shows why (`loss * 0.0`).
    disagree = [
        d
        for d in agreement.disagreements
        if not (d.variable in eager.zeros and d.gradcheck != Status.OK.value)
    ]
    if disagree or left_tensorflow:
        return report_from_result(eager, source, options, run)
    return report


def _report(source: SourceInfo, analysis: Analysis, context: Context) -> Report:
    if not any(v.trainable for v in analysis.verdicts):
        raise GradcheckError(
            f"the loss {source.loss!r} has no trainable variable to check: the model has none, "
            "or the loss is computed from constants and inputs only"
        )
    lines = SourceLines(_quoted_roots(source), dict(context.texts))
    intent = judge_intent(analysis, lines, requested=context.requested)
    explained = explain(analysis.verdicts, lines, intent.fixes, analysis.loss_dtype)
    findings = build_findings(analysis, context, lines, explained.fixes, intent.findings)
    locations = [f.location for f in findings]
    for verdict in analysis.verdicts:
        locations.append(verdict.location)
        locations += [b.location for b in verdict.blockers]
        locations += [step.location for step in verdict.route]
        locations += [op.location for op in verdict.subgraph_ops]
    code = {}
    for location in locations:
        text = lines.line(location)
        if location is not None and text is not None:
            code[(location.file, location.line)] = text
    findings, suppressed = _ignore_comments_applied(findings, analysis, lines, code, source)
    drawn = analysis.model_map
    if drawn is not None:  # each cut named by its finding's code, accepted variables so shown
        codes = {f.op: f.code for f in reversed(findings) if f.op is not None}
        drawn = drawn.with_codes(codes).accepting(suppressed)
    return Report(
        source=source,
        variables=analysis.verdicts,
        findings=findings,
        verification=context.verification,
        code=code,
        fixes=explained.fixes,
        code_fixes=explained.code_fixes,
        still_cut=explained.still_cut,
        intended=intent.intended,
        read_not_requested=context.read_not_requested,
        suppressed=suppressed,
        python_names={
            verdict.name: name
            for verdict in analysis.verdicts
            if (name := created_name(lines, verdict.location)) is not None
        },
        model_map=drawn,
    )


def _ignore_comments_applied(
    findings: tuple[Finding, ...],
    analysis: Analysis,
    lines: SourceLines,
    code: dict[tuple[str, int], str],
    source: SourceInfo,
) -> tuple[tuple[Finding, ...], dict[str, str]]:
    """The `# gradcheck: ignore` comments of the user's files the report quotes (and of the
    script checked) applied to the findings; the dead variables they suppress, with why."""
    files = {file for file, _ in code}
    if source.kind in ("script", "run") and source.path.endswith(".py"):
        files.add(str(Path(source.path).resolve()))
    comments = [comment for file in sorted(files) for comment in lines.ignore_comments(file)]
    if not comments:
        return findings, {}
    lines_of = {
        verdict.name: [verdict.location, *(b.location for b in verdict.blockers)]
        for verdict in analysis.verdicts
        if verdict.dead
    }
    found, suppressed = apply_ignore_comments(findings, comments, lines_of)
    return tuple(sorted(found, key=finding_order)), suppressed


# Inputs whose source locations come from the file itself (a SavedModel's debug info) or from
# library code (a Keras file): a report quotes only the files under these inputs' roots.
_FILE_KINDS = frozenset({"savedmodel", "savedmodel-tf1", "keras"})


def _quoted_roots(source: SourceInfo) -> list[Path] | None:
    """The folders a report may quote source lines from: the working folder and the model's
    (for a script, any file: running it imported them all already)."""
    if source.kind not in _FILE_KINDS:
        return None
    model = Path(source.path)
    return [Path.cwd(), model if model.is_dir() else model.parent]


def _verify_saved_model(
    path: Path, loss_name: str, verdicts: tuple[VariableVerdict, ...], options: CheckOptions
) -> Verification:
    """TensorFlow's own gradients on the SavedModel, loaded for real in the worker."""
    from gradcheck_cli.tracing.tf_verification import SAVED_MODEL_TAPE
    from gradcheck_cli.worker.process import run_worker
    from gradcheck_cli.worker.protocol import Job, TensorFlowGradients, WorkerRequest

    request_options = CheckOptions(
        loss=loss_name,
        verify=True,
        debug=options.debug,
        quiet=options.quiet,
        progress=options.progress,
    )
    try:
        result = run_worker(WorkerRequest(Job.VERIFY_SAVED_MODEL, path.resolve(), request_options))
    except GradcheckError as error:
        return Verification(method=SAVED_MODEL_TAPE, error=str(error))
    assert isinstance(result, TensorFlowGradients)
    return compare(verdicts, result.verdicts, result.error, SAVED_MODEL_TAPE)
