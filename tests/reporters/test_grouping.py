"""Dead variables told once per root cause, in the terminal and in Markdown (hand-made reports)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, Unreached, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import Format, TerminalOptions, render
from gradcheck_cli.reporters.grouping import capped, group_dead, scope_lines
from gradcheck_cli.reporters.terminal import render_terminal
from tests.reporters.factories import verdict

REPO = Path(__file__).resolve().parents[2]
MODEL = str(REPO / "distill.py")
CUT_LINE = SourceLocation(MODEL, 12)
STOP = Blocker(
    "StopGradient", "StopGradient", Reason.STOP_GRADIENT, "stop_gradient hides it", None, CUT_LINE
)
CAST = Blocker("Cast", "Cast", Reason.INTEGER_DTYPE, "integer", None, SourceLocation(MODEL, 9))
FIX = "remove the tf.stop_gradient at line 12"
REASON = "teacher is a network under tf.stop_gradient whose variables feed nothing else"


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # paths inside the repository print relative to it
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)


def _blocked(name: str, *blockers: Blocker) -> VariableVerdict:
    route = (
        PathStep(name, "_Arg"),
        *(PathStep(b.op, b.op_type, location=b.location, cut=b.reason) for b in blockers),
        PathStep("Mean", "Mean"),
    )
    return verdict(name, Status.BLOCKED, blockers=blockers or (STOP,), route=route)


def _teacher(layers: int = 53) -> list[VariableVerdict]:
    """A convolutional teacher: 174 variables in 53 layers (15 with four weights, 38 with
    three), all behind one tf.stop_gradient."""
    weights = []
    for index in range(layers):
        names = ("kernel", "gamma", "beta", "bias") if index < 15 else ("kernel", "gamma", "beta")
        weights += [_blocked(f"teacher/conv{index}/{name}", STOP) for name in names]
    return weights


def _student(count: int) -> list[VariableVerdict]:
    return [
        verdict(f"student/dense{i // 2}/{('kernel', 'bias')[i % 2]}", Status.OK)
        for i in range(count)
    ]


def _report(variables: list[VariableVerdict], **fields: object) -> Report:
    fixes = fields.pop("fixes", {v.name: FIX for v in variables if v.dead})
    source = SourceInfo(MODEL, "script", "loss")
    return Report(source, tuple(variables), fixes=fixes, **fields)  # type: ignore[arg-type]


def _terminal(report: Report, **options: object) -> str:
    return render_terminal(report, TerminalOptions(color=False, width=80, **options))  # type: ignore[arg-type]


# -- grouping keys --------------------------------------------------------------------------------


def test_variables_with_the_same_cuts_form_one_group() -> None:
    both = [_blocked("a/w", STOP, CAST), _blocked("b/w", CAST, STOP)]
    other = [_blocked("c/w", STOP), _blocked("d/w", CAST)]
    groups = group_dead(_report([*both, *other, verdict("e/w", Status.OK)]))
    assert [[v.name for v in g.members] for g in groups] == [["a/w", "b/w"], ["c/w"], ["d/w"]]


def test_fixes_that_differ_only_by_the_name_keep_the_group() -> None:
    variables = [_blocked("layer/kernel"), _blocked("layer/bias")]
    fixes = {v.name: f"use {v.name.split('/')[-1]} + tf.stop_gradient(q(x) - x)" for v in variables}
    (group,) = group_dead(_report(variables, fixes=fixes))
    assert group.fix == fixes["layer/kernel"] and group.fix_names_member
    text = _terminal(_report(variables, fixes=fixes))
    assert "written for layer/kernel: the same for each, with its own name" in text
    same = group_dead(_report(variables))
    assert len(same) == 1 and not same[0].fix_names_member


def test_fixes_that_differ_otherwise_split_the_group() -> None:
    variables = [_blocked("layer/kernel"), _blocked("layer/bias")]
    fixes = {"layer/kernel": "remove the tf.stop_gradient", "layer/bias": "give it its own loss"}
    assert len(group_dead(_report(variables, fixes=fixes))) == 2


def test_unused_variables_group_by_reason_and_owner() -> None:
    def unused(name: str, why: Unreached) -> VariableVerdict:
        return verdict(name, Status.UNUSED, unreached=why, path=name.replace("/", "."))

    variables = [
        unused("model/pooler/kernel", Unreached.NEVER_READ),
        unused("model/proj/kernel", Unreached.NEVER_READ),
        unused("model/head/kernel", Unreached.READ_NOT_REACHING),
        unused("critic/proj/kernel", Unreached.NEVER_READ),
    ]
    groups = group_dead(_report(variables))
    assert [len(g.members) for g in groups] == [2, 1, 1]


# -- a bias-less layer told with its siblings -----------------------------------------------------


def _unused_layers(*layers: tuple[str, ...]) -> list[VariableVerdict]:
    return [
        verdict(
            f"model/{layer}/{weight}",
            Status.UNUSED,
            unreached=Unreached.NEVER_READ,
            path=f"model.{layer}.{weight}",
            location=SourceLocation(MODEL, 20 + index),
        )
        for index, (layer, *weights) in enumerate(layers)
        for weight in weights
    ]


def test_a_bias_less_layer_is_told_like_a_layer_with_a_bias() -> None:
    with_bias = _terminal(_report(_unused_layers(("pooler", "kernel", "bias"))))
    without = _terminal(_report(_unused_layers(("proj", "kernel"))))
    assert "unused layer model/pooler (model.pooler): kernel, bias" in with_bias
    assert "unused layer model/proj (model.proj): kernel" in without
    for text in (with_bias, without):
        assert "not called in this loss's forward pass" in text
        assert "never reaches the loss:" not in text


def test_a_bias_less_layer_is_told_together_with_its_siblings() -> None:
    variables = _unused_layers(("pooler", "kernel", "bias"), ("proj", "kernel"))
    report = _report([*variables, verdict("model/head/kernel", Status.OK)])
    text = _terminal(report)
    assert text.count("\nunused ") == 1
    assert "unused 3 variables, for the same reason" in text
    assert "model: 3 variables in 2 layers" in text
    assert "pooler (kernel, bias), proj (kernel)" in text
    assert text.count(f"fix: {FIX}") == 1
    markdown = render(report, Format.MARKDOWN)
    assert markdown.count("| unused |") == 1
    assert markdown.replace("\\", "").count(f"**Fix:** {FIX}") == 1


# -- one screen per root cause --------------------------------------------------------------------


def test_a_174_variable_single_cause_report_fits_in_150_lines() -> None:
    report = _report([*_teacher(), *_student(40)])
    text = _terminal(report)
    lines = text.splitlines()
    assert len(lines) <= 150
    assert all(len(line) <= 80 for line in lines)
    assert "blocked 174 variables by the same cut" in text
    assert "teacher: 174 variables in 53 layers" in text
    assert re.search(r"… and \d+ more layers", text)
    assert text.count("cut 1 StopGradient") == 1 and text.count(f"fix: {FIX}") == 1
    # The summary table: a row for the group and one for the student's variables.
    assert re.search(r"^teacher/…\s+blocked\s+174\s+1$", text, flags=re.M)
    assert re.search(r"^student/…\s+ok\s+40\s*$", text, flags=re.M)
    markdown = render(report, Format.MARKDOWN)
    assert len(markdown.splitlines()) <= 150 and markdown.count("```mermaid") == 1


def test_a_small_report_keeps_a_row_per_variable() -> None:
    text = _terminal(_report([*_teacher(3), *_student(4)]))
    assert re.search(r"^teacher/conv0/kernel\s+blocked\s+\[2, 2\]\s+1$", text, flags=re.M)
    assert re.search(r"^student/dense1/bias\s+ok", text, flags=re.M)


def test_verbose_tells_every_variable_its_own_story() -> None:
    report = _report([*_teacher(), *_student(4)])
    text = _terminal(report, verbose=True)
    for variable in report.dead:
        assert f"blocked {variable.name} shape" in text
    assert "variables in 53 layers" not in text
    assert text.count("cut 1 StopGradient") == 174
    assert re.search(r"^student/dense1/bias\s+ok", text, flags=re.M)  # a row per variable


def test_why_with_a_layer_name_tells_its_variables() -> None:
    text = _terminal(_report(_teacher()), focus="conv3")
    stories = re.findall(r"^blocked (\S+) shape", text, flags=re.M)
    assert stories == [f"teacher/conv3/{name}" for name in ("kernel", "gamma", "beta", "bias")]


# -- intended cuts --------------------------------------------------------------------------------


def test_an_intended_cut_is_told_as_intended() -> None:
    teacher = _teacher()
    intended = {v.name: REASON for v in teacher}
    fix = "make it non-trainable (trainable=False) or accept it with allow-dead"
    report = _report(
        [*teacher, *_student(4)], intended=intended, fixes={v.name: fix for v in teacher}
    )
    text = _terminal(report)
    assert "not trained by this loss (looks intended) 174 variables" in text
    assert "blocked 174" not in text and "\nblocked " not in text
    assert text.count(REASON) == 1 and text.count(f"fix: {fix}") == 1
    assert re.search(r"^teacher/…\s+blocked \(looks intended\)\s+174", text, flags=re.M)
    coloured = render_terminal(report, TerminalOptions(color=True, width=80))
    assert "\x1b[1;33mnot trained by this loss (looks intended)" in coloured
    markdown = render(report, Format.MARKDOWN)
    assert "| not trained by this loss (looks intended) |" in markdown
    assert f"**Looks intended:** {REASON}" in markdown.replace("\\", "")
    alone = _terminal(_report(teacher[:1], intended=intended, fixes={teacher[0].name: fix}))
    assert "not trained by this loss (looks intended) teacher/conv0/kernel shape" in alone
    assert REASON in alone and f"fix: {fix}" in alone


def test_an_intended_cut_and_a_bug_with_the_same_cut_are_told_apart() -> None:
    teacher = _teacher(2)
    report = _report(teacher, intended={teacher[0].name: REASON})
    assert [len(g.members) for g in group_dead(report)] == [1, len(teacher) - 1]


# -- layout ---------------------------------------------------------------------------------------


def test_scope_lines_count_variables_and_layers() -> None:
    lines = scope_lines([*_teacher(2), _blocked("w"), _blocked("v")])
    assert lines == [
        (
            "teacher: 8 variables in 2 layers",
            ["conv0 (kernel, gamma, beta, bias)", "conv1 (kernel, gamma, beta, bias)"],
        ),
        ("2 variables", ["w", "v"]),
    ]


def test_capped_lists_stay_in_their_width_and_count_the_rest() -> None:
    items = [f"layer_{i} (kernel)" for i in range(100)]
    lines = capped(items, 60, "layer")
    assert len(lines) == 3 and all(len(line) <= 60 for line in lines)
    shown = sum(line.count("(kernel)") for line in lines)
    assert lines[-1].endswith(f"… and {100 - shown} more layers")
    assert capped(["a", "b"], 60, "layer") == ["a, b"]


def test_a_warning_per_variable_is_listed_once_with_a_count() -> None:
    teacher = _teacher()
    findings = tuple(
        Finding(
            "GC201",
            "stop-gradient-result-unused",
            Severity.WARNING,
            f"{v.name} is under a tf.stop_gradient",
            variable=v.name,
            op="StopGradient",
            location=CUT_LINE,
        )
        for v in teacher
    )
    report = _report(teacher, findings=findings)
    text = _terminal(report)
    assert len(text.splitlines()) <= 150
    assert text.count("is under a tf.stop_gradient") == 1
    assert "(the same for 173 more variables)" in " ".join(text.split())
    assert _terminal(report, verbose=True).count("is under a tf.stop_gradient") == 174


def test_an_unused_layer_that_looks_intended_is_told_as_intended() -> None:
    layer = _unused_layers(("probe", "kernel", "bias"))
    reason = "probe is trained by another loss in this script"
    text = _terminal(_report(layer, intended={v.name: reason for v in layer}))
    assert "not trained by this loss (looks intended) layer model/probe (model.probe)" in text
    assert reason in text and "\nunused " not in text
