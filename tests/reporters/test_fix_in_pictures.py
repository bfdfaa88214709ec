"""Markdown and DOT carry the fix the terminal report shows, word for word, and none when the
report has none."""

from __future__ import annotations

import re

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.reporters import Format, TerminalOptions, render
from gradcheck_cli.reporters.dot import FIX_WIDTH
from tests.reporters.factories import verdict
from tests.reporters.test_dot import parse

FN = "__inference_loss_17"
FIX = (
    "to use the transformed value forward and still train w, use the straight-through "
    "estimator (line 5):\n    y = w + tf.stop_gradient(tf.round(w) - w)"
)


def _blocked(name: str) -> VariableVerdict:
    return verdict(
        name,
        Status.BLOCKED,
        blockers=(Blocker("Round", "Round", Reason.NON_DIFFERENTIABLE_OP, "m", FN),),
        route=(
            PathStep(name, "_Arg", FN),
            PathStep("Round", "Round", FN, cut=Reason.NON_DIFFERENTIABLE_OP),
            PathStep("loss", "Mean", FN),
        ),
    )


def _report(fixes: dict[str, str]) -> Report:
    return Report(
        SourceInfo("model.py", "script", "loss"),
        (_blocked("w"),),
        fixes=fixes,
    )


def _terminal_fix(report: Report) -> list[str]:
    text = render(report, Format.TERMINAL, TerminalOptions(width=200))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("fix:"))
    return [lines[start].strip().removeprefix("fix: "), lines[start + 1].removeprefix("  ")]


def test_markdown_shows_the_terminal_fix() -> None:
    report = _report({"w": FIX})
    head, code = _terminal_fix(report)
    markdown = render(report, Format.MARKDOWN)
    fix_line = next(line for line in markdown.splitlines() if line.startswith("**Fix:**"))
    # Markdown escapes its own characters (`_`) in the prose; the words are the same.
    assert re.sub(r"\\(.)", r"\1", fix_line.removeprefix("**Fix:** ")) == head
    block = markdown.split(fix_line, 1)[1].split("```")[1].strip("\n")
    assert block == code.strip()


def test_dot_shows_the_terminal_fix() -> None:
    report = _report({"w": FIX})
    head, code = _terminal_fix(report)
    dot = parse(render(report, Format.DOT))
    [label] = [attrs["label"] for attrs in dot.nodes.values() if attrs.get("shape") == "note"]
    *words, code_line, end = label.split("\\l")
    # The words folded into lines of at most FIX_WIDTH, the code line whole, as the terminal.
    assert all(len(line) <= FIX_WIDTH for line in words) and len(words) > 1
    assert " ".join(words) == f"fix: {head}"
    assert (code_line, end) == (code, "")


def test_no_fix_no_fix_anywhere() -> None:
    report = _report({})
    assert "fix:" not in render(report, Format.TERMINAL)
    assert "**Fix:**" not in render(report, Format.MARKDOWN)
    assert "fix:" not in render(report, Format.DOT)
