"""The terminal report's contract with the terminal and with pipes, on hand-made reports.

Wrapping: on a terminal, a long line folds at the terminal's width with its continuation lines
indented like the line; to a pipe or a file (width None) no line is ever wrapped. `-q`: one
line per model, naming it. The verdict names what failed the run, and a `--verify`
disagreement says what to do next and shows in the table.
"""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.cells import cell_len

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.policy import FailOn
from gradcheck_cli.findings.report import (
    Disagreement,
    Report,
    RequestInfo,
    SourceInfo,
    Verification,
)
from gradcheck_cli.findings.rules import RULES, VERIFICATION_DISAGREES, VERIFICATION_DISAGREES_NEXT
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import CheckFailure, Format, TerminalOptions, render
from gradcheck_cli.reporters.terminal import render_terminal
from gradcheck_cli.run import ExitCode, Outcome, exit_code
from tests.reporters.factories import verdict

REPO = Path(__file__).resolve().parents[2]
MODEL = str(REPO / "train.py")
LONG_MESSAGE = " ".join(f"word{i}" for i in range(60))  # about 400 characters, with spaces
CUT = Blocker("StopGradient", "StopGradient", Reason.STOP_GRADIENT, LONG_MESSAGE, None, None)


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # paths inside the repository print relative to it
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)


def _blocked(name: str) -> VariableVerdict:
    route = (PathStep(name, "_Arg"), PathStep("StopGradient", "StopGradient", cut=CUT.reason))
    return verdict(name, Status.BLOCKED, blockers=(CUT,), route=route)


def _report(*variables: VariableVerdict, **fields: object) -> Report:
    source = fields.pop("source", SourceInfo(MODEL, "script", "loss"))
    return Report(source, variables, **fields)  # type: ignore[arg-type]


def _warning(code: str = "GC201") -> Finding:
    rule = RULES[code]
    assert rule.severity is Severity.WARNING
    return Finding(
        code, rule.name, Severity.WARNING, "a warning", location=SourceLocation(MODEL, 3)
    )


def _render(report: Report, **options: object) -> str:
    return render_terminal(report, TerminalOptions(color=False, **options))  # type: ignore[arg-type]


# -- wrapping -------------------------------------------------------------------------------------


def test_a_terminal_folds_long_lines_with_the_indentation_of_their_block() -> None:
    text = _render(_report(_blocked("dense/kernel")), width=60)
    lines = text.splitlines()
    assert all(len(line) <= 60 for line in lines)
    message = [line for line in lines if "word" in line]
    assert len(message) > 1
    # The cut's message is indented by 6: so is every line it folds into.
    assert all(line.startswith("      word") for line in message)
    assert " ".join(line.strip() for line in message if "word" in line) == LONG_MESSAGE


def test_a_pipe_gets_every_line_whole() -> None:
    report = _report(_blocked("dense/kernel"))
    text = _render(report, width=None)
    assert f"      {LONG_MESSAGE}\n" in text
    # Everything else reads as on a wide terminal: only the long line differs.
    wide = _render(report, width=1000)
    assert text == wide


SOURCE_LINE = (
    "      weights_i = tf.Variable(tf.truncated_normal([layer_size1, layer_size2],"
    "stddev=1.0 / math.sqrt(float(layer_size1))),name='weights_i')"
)
FIX_CODE = "weights = weights_i + tf.stop_gradient(tf.multiply((1.0/268435456.0),w_fl) - weights_i)"


def _with_code() -> Report:
    """A blocked variable with a long creation line and a fix to paste."""
    blocked = _blocked("weights_i")
    at = replace(blocked.variable, location=SourceLocation(MODEL, 36))
    return _report(
        replace(blocked, variable=at),
        verdict("b", Status.OK),
        code={(MODEL, 36): SOURCE_LINE},
        fixes={"weights_i": f"use the straight-through estimator:\n    {FIX_CODE}"},
    )


def test_code_folds_between_tokens_under_its_gutter_and_the_fix_still_pastes() -> None:
    lines = _render(_with_code(), width=80).splitlines()
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("       36 | "))
    shown = [lines[start]]
    shown += [line for line in lines[start + 1 :] if line.startswith("          | ")][:2]
    # The folded source line is the same Python: no name broken, under a gutter with no number.
    code = "\n".join(line[len("       36 | ") :] for line in shown)
    assert ast.dump(ast.parse(code.strip())) == ast.dump(ast.parse(SOURCE_LINE.strip()))
    assert len(shown) > 1
    begin = next(i for i, line in enumerate(lines) if line.startswith("      weights = "))
    fix = lines[begin : begin + 2]
    # Folded inside the call's brackets, where Python joins the lines: no backslash needed.
    assert fix[1].startswith("          ") and not fix[0].endswith("\\")
    assert ast.dump(ast.parse("\n".join(line.strip() for line in fix))) == ast.dump(
        ast.parse(FIX_CODE)
    )
    # A pipe gets them whole.
    whole = _render(_with_code(), width=None)
    assert f"       36 | {SOURCE_LINE}\n" in whole and f"      {FIX_CODE}\n" in whole


def test_the_source_line_is_in_the_terminal_s_normal_style() -> None:
    text = render_terminal(_with_code(), TerminalOptions(color=True, width=None))
    (line,) = [line for line in text.splitlines() if "36 |" in line]
    gutter, code = line.split("| ", 1)
    assert "\x1b[2m" in gutter  # the line number is dim, the code is not
    assert code.replace("\x1b[0m", "") == SOURCE_LINE
    (fix,) = [line for line in text.splitlines() if "weights = " in line]
    assert fix == f"  \x1b[32m    {FIX_CODE}\x1b[0m"  # the code to paste is green


@pytest.mark.parametrize("width", [None, 80])
def test_no_line_ends_in_a_space(width: int | None) -> None:
    report = _report(_blocked("dense/kernel"), verdict("b", Status.OK), verdict("c", Status.OK))
    for text in (_render(report, width=width), _render(_with_code(), width=width)):
        assert all(line == line.rstrip() for line in text.splitlines())
        assert "\nb  " in text.replace("  ok", "")  # the table is there, its rows stripped


# -- -q --------------------------------------------------------------------------------------------


def test_quiet_is_one_line_naming_the_model_even_on_a_narrow_terminal() -> None:
    dead = _render(_report(_blocked("dense/kernel"), verdict("b", Status.OK)), quiet=True, width=30)
    assert (
        dead
        == "train.py: 1 of 2 trainable variables is dead (1 ok, 1 blocked, 0 unused, 0 frozen)\n"
    )
    clean = _render(_report(verdict("b", Status.OK)), quiet=True, width=None)
    assert clean == (
        "train.py: every trainable variable gets gradient (1 ok, 0 blocked, 0 unused, 0 frozen)\n"
    )


def test_quiet_names_each_gradient_request_of_a_run_by_its_line() -> None:
    request = RequestInfo("GradientTape.gradient", SourceLocation(MODEL, 12))
    source = SourceInfo(MODEL, "run", "GradientTape.gradient at train.py:12", request)
    line = _render(_report(verdict("b", Status.OK), source=source), quiet=True, width=None)
    assert line.startswith("train.py:12: GradientTape.gradient: every trainable variable gets")
    # A request made in another file (a helper module) still names the script first.
    helper = RequestInfo("tf.gradients", SourceLocation(str(REPO / "helpers.py"), 7))
    source = SourceInfo(MODEL, "run", "tf.gradients at helpers.py:7", helper)
    line = _render(_report(verdict("b", Status.OK), source=source), quiet=True, width=None)
    assert line.startswith("train.py: tf.gradients at helpers.py:7: every trainable variable")


# -- why the run failed ---------------------------------------------------------------------------


def test_with_fail_on_warning_the_verdict_names_the_warnings_that_fail_the_run() -> None:
    report = _report(verdict("b", Status.OK), findings=(_warning("GC201"), _warning("GC202")))
    assert exit_code([Outcome(MODEL, report=report)], FailOn.WARNING) is ExitCode.DEAD_VARIABLES
    text = _render(report, fail_on=FailOn.WARNING)
    assert text.splitlines()[-1] == (
        "failed: 2 warnings (GC201, GC202) with --fail-on warning "
        "(1 ok, 0 blocked, 0 unused, 0 frozen)"
    )
    # The same report under the default policy passes, and says so.
    assert exit_code([Outcome(MODEL, report=report)], FailOn.ERROR) is ExitCode.CLEAN
    assert _render(report).splitlines()[-1].startswith("every trainable variable gets gradient")


def test_dead_variables_and_failing_warnings_are_both_named() -> None:
    rule = RULES["GC101"]
    own = Finding(rule.code, rule.name, rule.severity, "w is cut", variable="w")
    assert own.severity is Severity.ERROR
    report = _report(_blocked("w"), verdict("b", Status.OK), findings=(own, _warning()))
    last = _render(report, fail_on=FailOn.WARNING, width=None).splitlines()[-1]
    # The dead variable's own error is what the headline counts; the warning is named.
    assert last.startswith(
        "1 of 2 trainable variables is dead; also failed by 1 warning (GC201) "
        "with --fail-on warning ("
    )
    assert (
        _render(report, width=None)
        .splitlines()[-1]
        .startswith("1 of 2 trainable variables is dead (")
    )
    assert _render(report, fail_on=FailOn.NEVER).splitlines()[-1].startswith("1 of 2 ")


def test_a_disagreement_on_a_dead_variable_is_named_too() -> None:
    finding = VERIFICATION_DISAGREES.finding(
        tensorflow="gradient", name="w", gradcheck="blocked", variable="w"
    )
    verification = Verification("tf.gradients", (Disagreement("w", "blocked", "gradient"),))
    report = _report(_blocked("w"), findings=(finding,), verification=verification)
    assert (
        _render(report, width=None)
        .splitlines()[-1]
        .startswith("1 of 1 trainable variables is dead; also failed by 1 error (GC002) (")
    )


def test_an_error_that_is_not_a_dead_variable_is_named() -> None:
    report = _verify_disagreeing()
    assert exit_code([Outcome(MODEL, report=report)], FailOn.ERROR) is ExitCode.DEAD_VARIABLES
    assert _render(report).splitlines()[-1].startswith("failed: 1 error (GC002) (")


def test_the_verdict_is_red_when_the_run_fails() -> None:
    report = _report(verdict("b", Status.OK), findings=(_warning(),))
    failed = render_terminal(report, TerminalOptions(color=True, fail_on=FailOn.WARNING))
    passed = render_terminal(report, TerminalOptions(color=True))
    assert "\x1b[1;31mfailed: 1 warning" in failed
    assert "\x1b[1;32mevery trainable variable gets gradient" in passed


# -- --verify disagreements -----------------------------------------------------------------------


def _verify_disagreeing() -> Report:
    finding = VERIFICATION_DISAGREES.finding(
        tensorflow="none", name="scale", gradcheck="ok", variable="scale"
    )
    verification = Verification("tf.gradients", (Disagreement("scale", "ok", "none"),))
    return _report(
        verdict("scale", Status.OK),
        verdict("kernel", Status.OK),
        findings=(finding,),
        verification=verification,
    )


def test_a_verify_disagreement_says_what_to_do_and_shows_in_the_table() -> None:
    text = _render(_verify_disagreeing(), width=None)
    assert "TensorFlow disagrees with gradcheck on 1 variable (GC002" in text
    assert f"  next: {VERIFICATION_DISAGREES_NEXT}\n" in text
    assert "--debug" in VERIFICATION_DISAGREES_NEXT and "report" in VERIFICATION_DISAGREES_NEXT
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line[:1].isalpha()}
    assert rows["variable"][-1] == "tensorflow"
    assert rows["scale"][-2:] == ["none", "(disagrees)"]
    assert "disagrees" not in " ".join(rows["kernel"])


def test_no_tensorflow_column_when_tensorflow_agrees() -> None:
    agreed = _report(verdict("scale", Status.OK), verification=Verification("tf.gradients"))
    assert "tensorflow" not in _render(agreed)


# -- several models -------------------------------------------------------------------------------


def _several() -> list[Report]:
    return [
        _report(_blocked("a"), _blocked("b"), verdict("c", Status.OK)),
        _report(verdict("d", Status.OK), source=SourceInfo(str(REPO / "clean.py"), "script", "l")),
        _report(_blocked("e"), verdict("f", Status.OK), allowed={"e": "allow-dead e"}),
        _report(_blocked("g"), source=SourceInfo(str(REPO / "other.py"), "script", "loss")),
    ]


def test_several_models_end_with_one_line_for_them_all() -> None:
    reports = _several()
    text = render(reports, Format.TERMINAL, TerminalOptions(width=None))
    each = "\n".join(
        render(report, Format.TERMINAL, TerminalOptions(width=None)) for report in reports
    )
    assert text == each + (
        "\noverall: 3 dead variables in 2 of 4 models "
        "(3 ok, 4 blocked, 0 unused, 0 frozen; 1 dead but allowed)\n"
    )
    # The counts are the JSON summaries' own, summed.
    summaries = [item["summary"] for item in json.loads(render(reports, Format.JSON))]
    assert sum(summary["dead"] for summary in summaries) == 3
    assert sum(summary["allowed"] for summary in summaries) == 1
    assert sum(summary["blocked"] for summary in summaries) == 4
    # A model that could not be checked is counted (its error went to stderr); -q and --why
    # keep their own shapes.
    failed = CheckFailure("missing.py", "no such file")
    last = render([*reports, failed], Format.TERMINAL, TerminalOptions(width=None))
    assert last.splitlines()[-1].startswith(
        "overall: 3 dead variables in 2 of 4 models; 1 more model could not be checked ("
    )
    quiet = render(reports, Format.TERMINAL, TerminalOptions(quiet=True)).splitlines()
    assert len(quiet) == 4 and not any(line.startswith("overall") for line in quiet)
    focused = render(reports, Format.TERMINAL, TerminalOptions(focus="a", width=None))
    assert "overall" not in focused


def test_the_overall_line_says_what_else_fails_the_run() -> None:
    clean = [_report(verdict("a", Status.OK)), _report(verdict("b", Status.OK))]
    assert _last(clean) == (
        "overall: every trainable variable gets gradient, in both models "
        "(2 ok, 0 blocked, 0 unused, 0 frozen)"
    )
    warned = [clean[0], _report(verdict("b", Status.OK), findings=(_warning(),))]
    assert _last(warned, fail_on=FailOn.WARNING) == (
        "overall: failed: 1 warning (GC201) with --fail-on warning, in 1 of 2 models "
        "(2 ok, 0 blocked, 0 unused, 0 frozen)"
    )
    accepted = [clean[0], _report(_blocked("e"), suppressed={"e": "ignore at line 3"})]
    assert _last(accepted) == (
        "overall: no dead trainable variable beyond those suppressed, in 2 models "
        "(1 ok, 1 blocked, 0 unused, 0 frozen; 1 suppressed)"
    )
    teacher = [clean[0], _report(_blocked("t"), intended={"t": "a teacher, looks intended"})]
    assert _last(teacher) == (
        "overall: no dead variable in 2 models; 1 not trained by its loss (looks intended) "
        "(1 ok, 1 blocked, 0 unused, 0 frozen)"
    )
    request = RequestInfo("GradientTape.gradient", SourceLocation(MODEL, 12))
    run = SourceInfo(MODEL, "run", "GradientTape.gradient at train.py:12", request)
    steps = [_report(_blocked("g"), source=run), _report(verdict("d", Status.OK), source=run)]
    assert _last(steps).startswith("overall: 1 dead variable in 1 of 2 gradient requests (")


def _last(reports: list[Report], **options: object) -> str:
    options = {"width": None, **options}
    text = render(reports, Format.TERMINAL, TerminalOptions(**options))  # type: ignore[arg-type]
    return text.splitlines()[-1]


# -- every golden ---------------------------------------------------------------------------------

# The terminal goldens (tests/golden.py renders them at 80 columns; --why stories at 100).
TERMINAL_GOLDENS = sorted(
    path
    for path in (REPO / "tests" / "reporters" / "golden").glob("*.txt")
    if not path.name.endswith((".github.txt", ".text.txt"))
)
GOLDEN_WIDTHS = {"keras_creation_lines.txt": 100}


@pytest.mark.parametrize("golden", TERMINAL_GOLDENS, ids=lambda path: path.name)
def test_no_golden_line_ends_in_a_space_or_passes_its_width(golden: Path) -> None:
    width = GOLDEN_WIDTHS.get(golden.name, 80)
    lines = golden.read_text(encoding="utf-8").splitlines()
    assert lines and all(line == line.rstrip() for line in lines)
    assert all(cell_len(line) <= width for line in lines), max(lines, key=cell_len)
