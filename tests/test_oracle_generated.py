"""gradcheck's dead variables equal TensorFlow's on 80 random programs, live and as SavedModels.

Each program comes from `generated_models` (a seed gives its source); TensorFlow's tape in this
process is the judge (`tf_oracle_inprocess`). TensorFlow's trace and gradient of a program cost
about half a second of CPU, so the suite's 80 programs are a tenth of its CPU time; set
GRADCHECK_TEST_PROGRAMS to run more (each role of `generated_models` then meets more
neighbours, which matters after a change to the analysis). Seeds run ten per test case to share
start-up cost; a failing case lists every failing seed with its source, gradcheck's statuses and
TF's verdicts.
A group of ten is built once and judged by every test of `TestSeeds`, then let go: the process
never holds more than ten programs' TensorFlow graphs.
"""

from __future__ import annotations

import os
import shutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import generated_models
from tests.golden import assert_reports_match_golden, fixed_machine, report_text
from tests.tf_oracle_inprocess import dead_names, tf_verdicts, variable_name

SEEDS = range(int(os.environ.get("GRADCHECK_TEST_PROGRAMS", "80")))
GROUP = 10
# Under pytest-xdist, each half of the seeds runs on one worker: the two halves keep both of
# CI's cores busy.
HALVES = 2
GROUPS = [
    pytest.param(
        SEEDS[i : i + GROUP],
        marks=pytest.mark.xdist_group(f"generated programs, half {i * HALVES // len(SEEDS)}"),
    )
    for i in range(0, len(SEEDS), GROUP)
]


def saved_as_savedmodel(seed: int) -> bool:
    """A third of the seeds are also checked as a SavedModel."""
    return seed % 3 == 0


def checked_without_variables(seed: int) -> bool:
    """A fifth of those are checked again after deleting `variables/` (the graph must be
    enough)."""
    return seed % 15 == 0


@dataclass
class Case:
    seed: int
    module: Any
    loss: Any
    variables: list[Any]
    program: generated_models.GeneratedProgram
    verdicts: dict[str, str]  # TensorFlow's

    @property
    def names(self) -> set[str]:
        return {variable_name(v) for v in self.variables}


def build_case(seed: int) -> Case:
    """Program `seed`, with TensorFlow's verdicts."""
    module, loss, variables, program = generated_models.build_program(seed)
    verdicts = tf_verdicts(loss, variables, [generated_models.random_input(seed)])
    return Case(seed, module, loss, variables, program, verdicts)


def statuses(report: Any) -> dict[str, str]:
    return {v.name: v.status.value for v in report.variables}


def disagreement(case: Case, form: str, report: Any) -> str | None:
    """Why `report` disagrees with TensorFlow on `case`, or None when it agrees."""
    reported = statuses(report)
    gradcheck_dead = {v.name for v in report.variables if v.dead}
    tf_dead = dead_names(case.verdicts)
    missing = case.names - reported.keys()
    if gradcheck_dead == tf_dead and not missing:
        return None
    lines = [f"seed {case.seed} ({form}): gradcheck and TensorFlow disagree"]
    if missing:
        lines.append(f"  not in gradcheck's report: {sorted(missing)}")
    for name in sorted(gradcheck_dead - tf_dead):
        lines.append(f"  {name}: gradcheck says dead, TensorFlow says {case.verdicts.get(name)}")
    for name in sorted(tf_dead - gradcheck_dead):
        lines.append(
            f"  {name}: TensorFlow says {case.verdicts[name]}, gradcheck says {reported.get(name)}"
        )
    return "\n".join(lines + details(case, report))


def details(case: Case, report: Any = None) -> list[str]:
    lines = [f"  TensorFlow: {dict(sorted(case.verdicts.items()))}"]
    if report is not None:
        lines.append(f"  gradcheck:  {dict(sorted(statuses(report).items()))}")
        for verdict in report.variables:
            for blocker in verdict.blockers:
                lines.append(
                    f"    {verdict.name} blocked by {blocker.op} ({blocker.op_type}, "
                    f"{blocker.reason.value})"
                )
    lines.append(f"  generator intent: {case.program.roles}")
    lines.append("  source:")
    lines.extend("    " + line for line in case.program.source.splitlines())
    return lines


def failure(case: Case, form: str, error: BaseException) -> str:
    trace = "".join(traceback.format_exception(error, limit=-6))
    return "\n".join([f"seed {case.seed} ({form}) raised\n{trace}", *details(case)])


def check_group(cases: list[Case], check: Callable[[Case], list[str]]) -> None:
    problems = []
    for case in cases:
        problems.extend(check(case))
    assert not problems, f"{len(problems)} problem(s)\n\n" + "\n\n".join(problems)


def group_id(seeds: range) -> str:
    return f"seeds{seeds[0]:03d}-{seeds[-1]:03d}"


GOLDEN_SEEDS = range(80)
"""The seeds whose reports are kept as goldens: what each report says (verdicts, blockers,
explanations, findings, JSON and terminal) must not change unless a change means it to (for
example, work on speed must leave every byte as it was). Seeds beyond these, run with
GRADCHECK_TEST_PROGRAMS, are judged by TensorFlow only."""


def compare_with_golden(
    cases: list[Case], texts: dict[str, str], form: str, request: pytest.FixtureRequest
) -> None:
    seeds = range(cases[0].seed, cases[-1].seed + 1)
    if seeds[-1] in GOLDEN_SEEDS:
        assert_reports_match_golden(texts, f"generated/{group_id(seeds)}-{form}.json", request)


@pytest.fixture(scope="class")
def cases(seeds: range) -> list[Case]:
    """The group's programs with TensorFlow's verdicts, for the tests of one `TestSeeds`."""
    return [build_case(seed) for seed in seeds]


@pytest.mark.parametrize("seeds", GROUPS, ids=group_id, scope="class")
class TestSeeds:
    def test_check_function_agrees_with_tensorflow(
        self, cases: list[Case], request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from gradcheck_cli.api import check_function

        fixed_machine(monkeypatch)
        texts = {}

        def check(case: Case) -> list[str]:
            try:
                report = check_function(case.loss, variables=case.module.trainable_variables)
            except Exception as error:
                return [failure(case, "check_function", error)]
            texts[f"seed {case.seed}"] = report_text(report)
            problem = disagreement(case, "check_function", report)
            return [problem] if problem else []

        check_group(cases, check)
        compare_with_golden(cases, texts, "check_function", request)

    def test_savedmodel_agrees_with_tensorflow(
        self,
        cases: list[Case],
        tmp_path: Path,
        request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        import tensorflow as tf

        from gradcheck_cli.api import check

        fixed_machine(monkeypatch)
        texts = {}

        def check_saved(case: Case) -> list[str]:
            if not saved_as_savedmodel(case.seed):
                return []
            directory = tmp_path / f"seed{case.seed}"
            try:
                tf.saved_model.save(case.module, str(directory), signatures=None)
            except Exception as error:  # TensorFlow's own failure, reported with the program
                return [failure(case, "tf.saved_model.save", error)]
            try:
                report = check(directory, loss="loss")
            except Exception as error:
                return [failure(case, "SavedModel", error)]
            texts[f"seed {case.seed}"] = report_text(report, tmp_path)
            problems = [disagreement(case, "SavedModel", report)]
            if checked_without_variables(case.seed):
                shutil.rmtree(directory / "variables")
                try:
                    bare = check(directory, loss="loss")
                except Exception as error:
                    return [failure(case, "SavedModel without variables/", error)]
                problems.append(disagreement(case, "SavedModel without variables/", bare))
                if statuses(bare) != statuses(report):
                    problems.append(
                        "\n".join(
                            [
                                f"seed {case.seed}: deleting variables/ changed gradcheck's "
                                "verdicts",
                                f"  with variables/:    {dict(sorted(statuses(report).items()))}",
                                f"  without variables/: {dict(sorted(statuses(bare).items()))}",
                                *details(case),
                            ]
                        )
                    )
            return [p for p in problems if p]

        check_group(cases, check_saved)
        compare_with_golden(cases, texts, "savedmodel", request)

    def test_generated_verdicts_are_structural(self, cases: list[Case]) -> None:
        """The generator's premise: TensorFlow's verdicts do not depend on the input values, and
        they are the ones the generator meant (a data-dependent zero would be a false alarm)."""

        def check(case: Case) -> list[str]:
            other = tf_verdicts(
                case.loss, case.variables, [generated_models.random_input(case.seed, salt=1)]
            )
            if other == case.verdicts and dead_names(other) == case.program.intended_dead:
                return []
            return [
                "\n".join(
                    [
                        f"seed {case.seed}: TensorFlow's verdicts are not the generator's "
                        "intent or change with the input",
                        f"  on another input: {dict(sorted(other.items()))}",
                        f"  intended dead:    {sorted(case.program.intended_dead)}",
                        *details(case),
                    ]
                )
            ]

        check_group(cases, check)


def test_generated_programs_mix_live_and_dead() -> None:
    """About 40% of the variables are dead, for many different reasons."""
    roles = [
        role
        for seed in SEEDS
        for role in generated_models.generate(seed).roles.values()
        if role != generated_models.FROZEN
    ]
    dead = [role for role in roles if role != generated_models.LIVE]
    assert 0.3 < len(dead) / len(roles) < 0.5
    assert set(dead) == set(generated_models.DEAD_ROLE_WEIGHTS)
