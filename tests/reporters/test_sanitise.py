"""Names are data: control characters in names, paths and error text come out as escapes in
every human-readable format and error line, never as terminal commands or forged lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status, Unreached
from gradcheck_cli.cli import ExitCode, command
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.errors import GradcheckError, TextKind, capped, error_line, escape_controls
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.protos.tf_protos import protos
from gradcheck_cli.reporters import Format, TerminalOptions, render
from gradcheck_cli.reporters.sanitise import printable
from gradcheck_cli.reporters.terminal import render_terminal
from tests.cli_runs import cli_result
from tests.reporters.factories import verdict

# What a hostile model can name things: a clipboard write (OSC 52), a link (OSC 8), a window
# title, a bell, a carriage return that overwrites the line, a C1 CSI, and a line feed that
# starts a forged workflow command.
OSC_52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
OSC_8 = "\x1b]8;;https://example.com\x1b\\"
TITLE = "\x1b]0;pwned\x07"
FORGED = "\n::error file=x.py,line=1::forged"
VARIABLE = f"dense/kernel{OSC_52}\r{FORGED}"
OP = f"dense/Cast{TITLE}\x9b31m"
FUNCTION = f"__inference_loss{OSC_8}\x07_17"
PATH = f"models/evil{FORGED}\x9b/model.py"
LOSS = f"loss{TITLE}"
# Trojan Source: bidirectional overrides and isolates, marks, and a line separator.
TROJAN = "\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u2028\ufeff"
UNUSED = f"head/bias\x7f{TROJAN}\n::warning::also forged"

HUMAN_FORMATS = (Format.TERMINAL, Format.TEXT, Format.GITHUB, Format.MARKDOWN, Format.DOT)
# Any control character but the line feeds that end a format's own lines and the tabs of code.
_RAW_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]"
)


def _at(line: int) -> SourceLocation:
    return SourceLocation(PATH, line, FUNCTION)


def _hostile_report() -> Report:
    blocked = verdict(
        VARIABLE,
        Status.BLOCKED,
        location=_at(3),
        blockers=(Blocker(OP, "Cast", Reason.INTEGER_DTYPE, f"{OP} casts to int32", FUNCTION),),
        route=(
            PathStep(VARIABLE, "_Arg", FUNCTION, _at(3)),
            PathStep(OP, "Cast", FUNCTION, _at(5), cut=Reason.INTEGER_DTYPE),
            PathStep(LOSS, "Mean", FUNCTION, _at(9)),
        ),
    )
    unused = verdict(UNUSED, Status.UNUSED, unreached=Unreached.READ_NOT_REACHING)
    findings = (
        Finding(
            "GC102",
            "integer-cast-cuts-variable",
            Severity.ERROR,
            f"{VARIABLE} gets no gradient through {OP}",
            hint=f"keep {VARIABLE}'s path in floating point",
            variable=VARIABLE,
            op=OP,
            location=_at(5),
        ),
        Finding(
            "GC108",
            "variable-never-reaches-loss",
            Severity.ERROR,
            f"{UNUSED} never reaches the loss",
            variable=UNUSED,
        ),
    )
    return Report(
        SourceInfo(PATH, "script", LOSS),
        (blocked, unused),
        findings,
        code={(PATH, 3): f"w = tf.Variable(1.0)  # {OSC_8}", (PATH, 5): "y = tf.cast(w, tf.int32)"},
        fixes={VARIABLE: f"keep {VARIABLE}'s path in floating point:\n    y = tf.round(w)"},
    )


def _rendered(output_format: Format) -> str:
    return render(_hostile_report(), output_format)


@pytest.mark.parametrize("output_format", HUMAN_FORMATS, ids=lambda f: f.value)
def test_no_control_character_reaches_a_human_format(output_format: Format) -> None:
    text = _rendered(output_format)
    assert not _RAW_CONTROL.findall(text)
    # Every name is still there, its control characters shown as escapes.
    for shown in ("x1b]52;c;cm0gLXJmIH4=", "x1b]0;pwned", "x9b31m"):
        assert shown in text


@pytest.mark.parametrize("output_format", HUMAN_FORMATS, ids=lambda f: f.value)
def test_a_line_feed_in_a_name_forges_no_workflow_command(output_format: Format) -> None:
    lines = _rendered(output_format).splitlines()
    # The runner reads a command from any line of a step's output, after leading spaces.
    commands = [line for line in lines if line.lstrip().startswith("::")]
    if output_format is Format.GITHUB:
        assert len(commands) == 2  # one annotation per dead variable, as without the names
        assert all(re.match(r"::error (file=|title=)", line) for line in commands)
    else:
        assert commands == []


def test_text_has_one_line_per_finding_whatever_the_names_hold() -> None:
    lines = _rendered(Format.TEXT).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(r"models/evil\n::error file=x.py,line=1::forged\x9b/model.py:5: ")


def test_the_terminal_shows_the_fix_for_a_hostile_name_with_its_code_line() -> None:
    # The fix is looked up by the escaped name, and its own line break is kept.
    text = render_terminal(_hostile_report(), TerminalOptions(width=300))
    lines = [line.strip() for line in text.splitlines()]
    assert "y = tf.round(w)" in lines
    fix = next(line for line in lines if line.startswith("fix:"))
    assert r"\r\n::error file=x.py,line=1::forged's path in floating point:" in fix


def test_a_sentence_keeps_its_own_line_breaks_and_escapes_the_names_in_it() -> None:
    shown = printable(_hostile_report())
    assert shown.fixes[escape_controls(VARIABLE)].splitlines()[1] == "    y = tf.round(w)"
    assert "\n" not in shown.findings[0].message
    assert "\n" not in (shown.findings[0].hint or "")


def test_a_name_is_not_read_as_rich_markup() -> None:
    report = Report(
        SourceInfo("model.py", "script", "loss"),
        (
            verdict("[bold]w[/bold] [link=https://example.com]x[/link]", Status.UNUSED),
            # A backslash before the tag, and an escaped ESC before it: still plain text.
            verdict("a\\[bold]x[/bold] \x1b[red]y", Status.UNUSED),
        ),
    )
    text = render_terminal(report, TerminalOptions(color=True))
    assert "[bold]w[/bold] [link=https://example.com]x[/link]" in text
    assert "a\\[bold]x[/bold] \\x1b[red]y" in text
    assert "\x1b]8;" not in text  # no hyperlink was made of the name


@pytest.mark.parametrize("output_format", [Format.JSON, Format.SARIF], ids=lambda f: f.value)
def test_machine_formats_keep_names_as_they_are(output_format: Format) -> None:
    document = json.loads(_rendered(output_format))
    names = json.dumps(document, ensure_ascii=False)
    assert json.dumps(VARIABLE, ensure_ascii=False)[1:-1] in names


def test_a_long_loss_name_is_capped_in_the_report() -> None:
    report = Report(SourceInfo("model.py", "script", "x" * 130_000), (verdict("w", Status.OK),))
    text = render_terminal(report, TerminalOptions(width=None))
    assert len(text) < 3_000  # not 130 KB
    assert f"{'x' * 249}…{'x' * 249} (130000 characters)" in text


def test_escape_controls_and_capped() -> None:
    assert escape_controls("a\x1b[2J\tb\r\n\x7f\x9b\x00\udcff") == (
        r"a\x1b[2J\tb\r\n\x7f\x9b\x00\udcff"
    )
    assert escape_controls("dense/kernel:0 ünïcode") == "dense/kernel:0 ünïcode"
    sentence = "fix:\n\ty = x\r"
    assert escape_controls(sentence, TextKind.SENTENCE) == "fix:\n\ty = x\\r"
    assert escape_controls(sentence, TextKind.CODE) == "fix:\\n\ty = x\\r"
    assert escape_controls(sentence) == "fix:\\n\\ty = x\\r"
    assert capped("abc", 5) == "abc"
    assert capped("abcdefgh", 6) == "ab…gh (8 characters)"  # at most 6: start, "…", end
    assert capped(capped("abcdefgh", 6), 6) == "ab…gh (8 characters)"  # once only
    path = "/home/me/" + "deep/" * 100 + "model.py"
    assert capped(path).endswith("/deep/model.py (517 characters)")
    # An error line shortens a long value once: shown again (the CLI's `say`), it is unchanged.
    for line in (f"{path}: no such file", f"cannot read {path!r} at all"):
        assert error_line(error_line(line)) == error_line(line) != line


def test_a_gradcheck_error_reads_as_one_escaped_line_wherever_it_is_shown() -> None:
    # The CLI, the Python API and pytest all show str() of the error.
    error = GradcheckError(f"cannot read {PATH}")
    assert str(error) == r"cannot read models/evil\n::error file=x.py,line=1::forged\x9b/model.py"
    assert error.args == (f"cannot read {PATH}",)  # the raw text stays with the exception


def test_error_line_is_one_line_with_long_values_capped() -> None:
    line = error_line(f"no loss named {'x' * 1000!r} in {'/very' * 100}: {TITLE}\nnext")
    assert "\n" not in line and "\x1b" not in line
    assert f"'{'x' * 249}…{'x' * 249} (1000 characters)'" in line
    assert "/very/very:" not in line[:200] and "/very: (501 characters) " in line
    assert line.endswith(r"\x1b]0;pwned\x07\nnext")


# -- the error path: what the CLI prints when it cannot analyse the input ------------------------


def _saved_model_without_functions(tmp_path: Path) -> Path:
    """A SavedModel that names no loss: gradcheck echoes `--loss` back, without TensorFlow."""
    saved_model = protos().saved_model_pb2.SavedModel()
    saved_model.meta_graphs.add().meta_info_def.tags.append("serve")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "saved_model.pb").write_bytes(saved_model.SerializeToString())
    return folder


def _error(*args: str) -> str:
    result = cli_result(command, list(args))
    assert result.exit_code == ExitCode.ERROR, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    return result.stderr


def test_an_error_line_escapes_control_characters_of_the_loss_and_the_path(
    tmp_path: Path,
) -> None:
    folder = _saved_model_without_functions(tmp_path)
    err = _error(str(folder), "--loss", f"{OSC_52}{FORGED}\u009b")
    assert err.count("\n") == 1 and not _RAW_CONTROL.findall(err)
    assert r"\x1b]52;c;cm0gLXJmIH4=\x07\n::error file=x.py,line=1::forged\x9b" in err
    missing = tmp_path / f"no{TITLE}{FORGED}"
    err = _error(str(missing))
    assert err.count("\n") == 1 and not _RAW_CONTROL.findall(err)
    assert r"no\x1b]0;pwned\x07\n::error" in err


def test_a_130_kb_loss_is_not_echoed_whole(tmp_path: Path) -> None:
    folder = _saved_model_without_functions(tmp_path)
    err = _error(str(folder), "--loss", "x" * 130_000)
    assert len(err) < 1_000
    assert f"'{'x' * 249}…{'x' * 249} (130000 characters)'" in err
    assert err.startswith("gradcheck: error: no loss named 'xxx")


def test_a_tab_is_escaped_in_a_name_and_kept_in_the_code() -> None:
    location = SourceLocation("model.py", 3)
    report = Report(
        SourceInfo("model.py", "script", "loss"),
        (verdict("dense\tkernel", Status.UNUSED, location=location),),
        code={("model.py", 3): "\tw = tf.Variable(1.0)"},
    )
    shown = printable(report)
    assert shown.variables[0].name == "dense\\tkernel"
    assert shown.code_at(location) == "\tw = tf.Variable(1.0)"
    text = render_terminal(report, TerminalOptions())
    assert "unused dense\\tkernel" in text
    code = next(line for line in text.splitlines() if "w = tf.Variable(1.0)" in line)
    assert "\\t" not in code  # the console expands the tab to spaces


def test_why_finds_a_variable_by_its_own_name_and_tells_its_story_escaped() -> None:
    text = render_terminal(_hostile_report(), TerminalOptions(width=300, focus=VARIABLE))
    assert not _RAW_CONTROL.findall(text)
    assert "blocked dense/kernel\\x1b]52;c;cm0gLXJmIH4=\\x07\\r\\n::error" in text
    assert "y = tf.round(w)" in text
