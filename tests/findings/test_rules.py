"""The rule catalogue: stable codes, complete documentation, and `gradcheck --explain`."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from gradcheck_cli.cli import ExitCode, command
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Severity
from gradcheck_cli.findings.rules import DEAD_VARIABLE_CODE_BY_REASON, RULES, Rule
from gradcheck_cli.reporters.explain import SECTIONS, render_catalogue, render_rule
from tests.import_probe import imported_after

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_codes_are_keys_and_follow_the_pattern() -> None:
    for code, rule in RULES.items():
        assert code == rule.code
        assert re.fullmatch(r"GC\d{3}", code), code


def test_names_are_kebab_case_and_unique() -> None:
    names = [rule.name for rule in RULES.values()]
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", name), name


@pytest.mark.parametrize("rule", RULES.values(), ids=lambda rule: rule.code)
def test_every_section_is_written(rule: Rule) -> None:
    for section in ("summary", "what_it_does", "why_bad", "example", "use_instead"):
        assert getattr(rule, section).strip(), f"{rule.code} has an empty {section}"


def test_severities_follow_the_code_ranges() -> None:
    for code, rule in RULES.items():
        if code.startswith("GC1"):
            assert rule.severity is Severity.ERROR, code
        elif code.startswith("GC2"):
            assert rule.severity is not Severity.ERROR, code
        else:
            assert code.startswith("GC0"), code


def test_every_reason_maps_to_a_dead_variable_code() -> None:
    assert set(DEAD_VARIABLE_CODE_BY_REASON) == {reason.value for reason in Reason}
    for code in DEAD_VARIABLE_CODE_BY_REASON.values():
        assert code in RULES and code.startswith("GC1")
    assert len(set(DEAD_VARIABLE_CODE_BY_REASON.values())) == len(Reason)


@pytest.mark.parametrize("color", [False, True], ids=["plain", "color"])
@pytest.mark.parametrize("rule", RULES.values(), ids=lambda rule: rule.code)
def test_every_rule_renders(rule: Rule, color: bool) -> None:
    text = render_rule(rule, color=color, width=100)
    assert ("\x1b[" in text) is color
    plain = ANSI.sub("", text)
    assert plain.splitlines()[0] == f"{rule.code} {rule.name} ({rule.severity.value})"
    for heading in SECTIONS:
        assert heading in text
    # Code is shown as code: every line of the example, indented.
    for line in rule.example.splitlines():
        if line.strip():
            assert f"    {line.rstrip()}" in plain.splitlines()


def test_catalogue_lists_every_rule() -> None:
    text = render_catalogue()
    for rule in RULES.values():
        assert re.search(rf"{rule.code}\s+{rule.name}\s+{rule.severity.value}", text)


def _explain(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, ["--explain", *args], env={"NO_COLOR": "1"})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("code", ["GC101", "gc101", " Gc101 "])
def test_explain_prints_the_rule_without_a_model(code: str) -> None:
    exit_code, out, err = _explain(code)
    assert exit_code == ExitCode.CLEAN
    assert out.splitlines()[0] == "GC101 stop-gradient-cuts-variable (error)"
    assert "Use instead" in out
    assert err == ""


def test_explain_with_a_model_still_only_explains() -> None:
    exit_code, out, _ = _explain("GC201", "does/not/exist")
    assert exit_code == ExitCode.CLEAN
    assert out.startswith("GC201 stop-gradient-result-unused (warning)")


def test_explain_unknown_code_exits_2_with_one_line() -> None:
    exit_code, out, err = _explain("GC999")
    assert exit_code == ExitCode.ERROR
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("gradcheck: error: unknown rule code GC999; known codes: ")
    assert "GC101" in err


def test_explain_all_lists_every_code() -> None:
    exit_code, out, err = _explain("all")
    assert exit_code == ExitCode.CLEAN
    for code in RULES:
        assert code in out
    assert err == ""


def test_explain_does_not_import_tensorflow() -> None:
    assert not imported_after(
        "from click.testing import CliRunner; from gradcheck_cli.cli import command; "
        "result = CliRunner().invoke(command, ['--explain', 'GC101']); "
        "assert result.exit_code == 0, result.output"
    )
