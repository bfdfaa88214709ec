"""The analysis of a traced result (the worker's, or an in-process trace), and the analyses of a
run's requests made while the script still runs."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.concerns import regularizer_only
from gradcheck_cli.analysis.model_map import model_map
from gradcheck_cli.analysis.penalties import tied_to_trained
from gradcheck_cli.analysis.verdicts import Analysis, Status
from gradcheck_cli.options import CheckOptions

if TYPE_CHECKING:
    from gradcheck_cli.worker.protocol import Traced


class EarlyAnalyses:
    """A run's graph requests analysed as the worker writes them, while the script goes on to
    its first weight change (often seconds of tracing after its requests): the reports then
    need only look them up. A request of the result is looked up by equality, so one that
    differs in anything from what was analysed early is analysed again, as without this."""

    def __init__(self, options: CheckOptions) -> None:
        self._options = options
        self._done: list[tuple[Traced, tuple[Analysis, list[str]]]] = []

    def add(self, traced: Traced) -> None:
        from gradcheck_cli.worker.protocol import TracedGraph

        if isinstance(traced, TracedGraph) and traced.eager_fallback is not None:
            traced = replace(traced, eager_fallback=None)  # the graph the report analyses
        try:
            self._done.append((traced, traced_analysis(traced, self._options)))
        except Exception:  # the report analyses it again, and tells what it raises there
            return

    def analysis(self, traced: Traced, options: CheckOptions) -> tuple[Analysis, list[str]]:
        """`traced_analysis(traced, options)`, analysed early if it was."""
        if options == self._options:
            for done, (analysis, notes) in self._done:
                if done == traced:
                    return analysis, list(notes)
        return traced_analysis(traced, options)


def traced_analysis(result: Traced, options: CheckOptions) -> tuple[Analysis, list[str]]:
    """The analysis of a traced loss, judged on the variables it asks gradients for, and the
    notes of its graph model."""
    from gradcheck_cli.protos.traced_program import program_from_traced
    from gradcheck_cli.worker.protocol import TracedFunction

    program = program_from_traced(result, sum_loss=options.sum_loss)
    context = set(getattr(result, "context_variables", ()))
    if isinstance(result, TracedFunction) and result.tape_variables is not None:
        context |= {v.name for v in program.variables} - set(result.tape_variables)
    whole = analyse(program, cuts_of_live=options.all_cuts)
    # Variables the graph reads that the request does not list, and that its loss would train
    # if it did (a codebook, not a teacher under tf.stop_gradient).
    trainable_context = {v.name for v in whole.verdicts if v.name in context and not v.dead}
    analysis = replace(_judged(whole, context), trainable_context=frozenset(trainable_context))
    data_only = result.data_only if isinstance(result, TracedFunction) else None
    if data_only is not None:
        alone = analyse(program_from_traced(data_only, sum_loss=options.sum_loss))
        only = regularizer_only(analysis, alone)
        if only:  # each told unless a term ties it to what the data trains
            trained = [v.name for v in alone.verdicts if v.status is Status.OK]
            untrained = [name for concern in only for name in concern.variables]
            tied = tied_to_trained(program, untrained, trained)
            only = regularizer_only(analysis, alone, tied)
        analysis = replace(analysis, concerns=analysis.concerns + only)
    if options.model_map:
        analysis = replace(analysis, model_map=model_map(program, analysis.verdicts))
    return analysis, list(program.notes)


def by_tape(first: Analysis, other: Analysis) -> Analysis:
    """Two tapes of one train_step: each variable judged by the tape that differentiates it,
    as `gradcheck run` judges each request; one that both differentiate is live if either
    trains it."""
    verdicts = {v.name: v for v in first.verdicts}
    for verdict in other.verdicts:
        known = verdicts.get(verdict.name)
        if known is None or (known.dead and not verdict.dead):
            verdicts[verdict.name] = verdict
    concerns = first.concerns + tuple(c for c in other.concerns if c not in first.concerns)
    return replace(
        first,
        verdicts=tuple(verdicts.values()),
        concerns=concerns,
        trainable_context=first.trainable_context | other.trainable_context,
        loss_dtype=first.loss_dtype if first.loss_dtype == other.loss_dtype else None,
    )


def _judged(analysis: Analysis, context: set[str]) -> Analysis:
    """The analysis without the variables that were in the graph only as context."""
    if not context:
        return analysis
    return replace(
        analysis,
        verdicts=tuple(v for v in analysis.verdicts if v.name not in context),
        concerns=tuple(
            c for c in analysis.concerns if not c.variables or set(c.variables) - context
        ),
    )
