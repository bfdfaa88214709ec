"""A run's graph requests reach gradcheck as the worker makes them, and are analysed while the
script traces on: the reports are the ones the finished result alone gives."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gradcheck_cli.options import CheckOptions
from gradcheck_cli.pipeline import run_reports
from gradcheck_cli.reporters import Format, render
from gradcheck_cli.traced_analysis import EarlyAnalyses
from gradcheck_cli.worker.process import run_worker
from gradcheck_cli.worker.protocol import Job, RunResult, Traced, WorkerRequest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "run" / "critic_loop.py"
OPTIONS = replace(CheckOptions(), sum_loss=True)


@pytest.fixture(scope="module")
def run() -> tuple[RunResult, list[Traced]]:
    shared: list[Traced] = []
    result = run_worker(WorkerRequest(Job.RUN, SCRIPT, CheckOptions()), None, shared.append)
    assert isinstance(result, RunResult)
    return result, shared


def test_each_graph_request_is_handed_on_once_as_it_is_in_the_result(
    run: tuple[RunResult, list[Traced]],
) -> None:
    result, shared = run
    # The critic's request is reached at each of the loop's three passes; one is kept.
    assert len(result.requests) == 2
    assert shared == [request.result for request in result.requests]


def test_the_reports_are_those_of_the_result_alone(run: tuple[RunResult, list[Traced]]) -> None:
    result, shared = run
    early = EarlyAnalyses(OPTIONS)
    for traced in shared:
        early.add(traced)
    alone = run_reports(str(SCRIPT), result, OPTIONS)
    with_early = run_reports(str(SCRIPT), result, OPTIONS, early=early)
    assert [render(r, Format.JSON) for r in with_early] == [render(r, Format.JSON) for r in alone]


def test_a_request_analysed_early_is_not_analysed_again(
    run: tuple[RunResult, list[Traced]],
) -> None:
    _, shared = run
    early = EarlyAnalyses(OPTIONS)
    early.add(shared[0])
    first, _ = early.analysis(shared[0], OPTIONS)
    assert early.analysis(shared[0], OPTIONS)[0] is first
    # Another request, or the same under other options, is analysed as it comes.
    assert early.analysis(shared[1], OPTIONS)[0] is not early.analysis(shared[1], OPTIONS)[0]
    other = replace(OPTIONS, all_cuts=True)
    assert early.analysis(shared[0], other)[0] is not first
