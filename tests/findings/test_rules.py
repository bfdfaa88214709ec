"""The rule catalogue: stable codes, complete documentation, and `gradcheck --explain`."""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import replace
from pathlib import Path

import pytest

import gradcheck_cli
from gradcheck_cli.analysis.verdicts import (
    Concern,
    ConcernKind,
    Status,
    Unreached,
    VariableVerdict,
)
from gradcheck_cli.cli import ExitCode, command
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings import rules as catalogue
from gradcheck_cli.findings.finding import Severity
from gradcheck_cli.findings.rules import RULE_BY_CONCERN, RULE_BY_REASON, RULES, SECTIONS, Rule
from gradcheck_cli.graph.model import Variable
from gradcheck_cli.reporters.explain import render_catalogue, render_rule
from tests.cli_runs import Ran, invoke
from tests.import_probe import imported_after
from tests.reporters.factories import verdict

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


@pytest.mark.parametrize(
    ("rule_by", "kinds", "attribute", "group"),
    [(RULE_BY_REASON, Reason, "reason", "GC1"), (RULE_BY_CONCERN, ConcernKind, "concern", "GC2")],
    ids=["reason", "concern"],
)
def test_every_reason_and_concern_has_its_own_rule(
    rule_by: dict[enum.Enum, Rule], kinds: type[enum.Enum], attribute: str, group: str
) -> None:
    """A dead variable's cut picks a 1xx rule, and each kind of concern a 2xx rule."""
    assert set(rule_by) == set(kinds)
    for kind, rule in rule_by.items():
        assert getattr(rule, attribute) is kind
        assert rule.code.startswith(group)
    assert len({rule.code for rule in rule_by.values()}) == len(kinds)


def test_every_rule_is_named_after_itself_in_the_catalogue() -> None:
    for rule in RULES.values():
        assert getattr(catalogue, rule.name.upper().replace("-", "_")) is rule


def test_dead_variable_rules_are_told_per_variable_or_for_the_whole_loss() -> None:
    for code, rule in RULES.items():
        if code.startswith("GC1"):
            assert rule.told_in_story != rule.whole_loss, code
        else:
            # A dead variable whose cut looks intended is told in its own (grouped) story too.
            assert rule.told_in_story == (code in {"GC209", "GC210"}), code
            assert not rule.whole_loss, code
    assert {code for code, rule in RULES.items() if rule.whole_loss} == {"GC109", "GC110"}
    listed = {code for code, rule in RULES.items() if rule.listed_without_verbose}
    assert listed == {"GC003", "GC005", "GC007", "GC214"}
    for code in listed:
        assert RULES[code].severity is Severity.INFO


_CUT = {"name": "w", "op_type": "Cast", "op_name": "loss/Cast", "detail": "int32 carries none"}
_CONCERN = Concern(
    kind=ConcernKind.CUT_ON_SOME_PATHS,
    op="keys/StopGradient",
    op_type="StopGradient",
    variables=("embedding",),
    detail="this use passes nothing",
)
# The data build.py and policy.py hand each rule, and a word each message must show.
_MESSAGE_DATA: dict[str, tuple[dict[str, object], str]] = {
    "GC001": ({"note": "unknown op MyOp"}, "MyOp"),
    "GC002": ({"tensorflow": "none", "name": "w", "gradcheck": "ok"}, "'none' for w"),
    "GC003": ({"method": "tf.gradients", "compared": 3}, "all 3 verdicts"),
    "GC004": ({"error": "no variables/"}, "no variables/"),
    "GC005": ({}, "save_debug_info=True"),
    "GC007": ({"name": "w", "why": "listed in the baseline"}, "w is dead"),
    "GC008": ({"comment": "gradcheck: ignore[GC101]"}, "suppresses nothing"),
    "GC009": (
        {"names": ("quantize_annotate/kernel",), "why": "the layer is held by no object"},
        "1 trainable variable is left out of the check: quantize_annotate/kernel; the layer",
    ),
    **{rule.code: (_CUT, "'loss/Cast'") for rule in RULE_BY_REASON.values() if rule.told_in_story},
    "GC108": (
        {
            "verdict": VariableVerdict(
                Variable("dense/kernel", True, "float32", (2,), None, path="model.proj.kernel"),
                Status.UNUSED,
                unreached=Unreached.NEVER_READ,
            )
        },
        "dense/kernel (model.proj.kernel) never reaches the loss: the loss function never reads",
    ),
    "GC109": ({"reason": "it calls .numpy()"}, "(it calls .numpy())"),
    "GC110": ({}, "no trainable variable"),
    **{
        rule.code: ({"concern": _CONCERN, "line": "k = tf.stop_gradient(q)"}, "tf.stop_gradient")
        for rule in RULE_BY_CONCERN.values()
        if rule.code in ("GC201", "GC202", "GC203")
    },
    "GC204": ({"concern": _CONCERN, "line": None}, "embedding trains through another path"),
    "GC205": ({"concern": _CONCERN, "line": None}, "embedding: this use passes nothing"),
    "GC206": ({"concern": _CONCERN, "line": None}, "embedding is reached only through"),
    "GC211": ({"concern": _CONCERN, "line": None}, "this term of the loss trains nothing"),
    "GC207": ({"names": ("teacher/kernel", "teacher/bias")}, "2 trainable variables are given"),
    "GC208": ({"names": ("bn/moving_mean",)}, "non-trainable variables are given"),
    "GC213": ({"names": ("codebook",)}, "this loss reads a trainable variable that its gradient"),
    "GC214": (
        {"copies": (("target/kernel", "online/kernel"),)},
        "a trainable variable holds the same values as variables a gradient request trains, "
        "and no request trains them: target/kernel (= online/kernel)",
    ),
    "GC212": (
        {"api": "critic.fit", "model": "critic", "frozen": 4},
        "critic.fit trains nothing: critic is compiled, but none of its 4 weights",
    ),
    "GC112": ({"name": "codebook", "estimator": "at line 7"}, "codebook gets no gradient"),
    "GC209": ({"name": "teacher/k", "reason": "this looks intended"}, "teacher/k is not trained"),
    "GC210": ({"name": "critic/k", "reason": "another loss trains it"}, "another loss trains it"),
}


@pytest.mark.parametrize("rule", RULES.values(), ids=lambda rule: rule.code)
def test_every_rule_words_its_own_message(rule: Rule) -> None:
    data, shown = _MESSAGE_DATA[rule.code]
    found = rule.finding(variable="w", **data)
    assert (found.code, found.rule, found.severity) == (rule.code, rule.name, rule.severity)
    assert shown in found.message
    assert "\n" not in found.message and "{" not in found.message


def test_a_cut_in_a_branch_with_no_variable_named_speaks_of_an_input() -> None:
    concern = replace(_CONCERN, kind=ConcernKind.CUT_IN_BRANCH, variables=())
    message = catalogue.CUT_IN_ONE_COND_BRANCH.message(concern=concern, line=None)
    assert message == "an input: this use passes nothing"


def test_every_unreached_has_words_in_the_never_reaches_message() -> None:
    for unreached in Unreached:
        unused = verdict("v", Status.UNUSED, unreached=unreached)
        message = catalogue.VARIABLE_NEVER_REACHES_LOSS.message(verdict=unused)
        assert message == f"v never reaches the loss: {catalogue.UNREACHED_WORDS[unreached]}"


def _code_literals(path: Path) -> list[str]:
    """String constants in `path` that are a rule code or a code prefix (`GC109`, `GC1`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.name}:{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"GC\d{1,3}", node.value.strip())
    ]


def test_no_code_literal_outside_the_catalogue() -> None:
    package = Path(gradcheck_cli.__file__).parent
    sources = [p for p in sorted(package.rglob("*.py")) if p != Path(catalogue.__file__)]
    assert len(sources) > 20
    assert [hit for path in sources for hit in _code_literals(path)] == []
    assert _code_literals(Path(catalogue.__file__))  # the check does find them where they are


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


def _explain(*args: str) -> Ran:
    return invoke(command, ["--explain", *args], env={"NO_COLOR": "1"})


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


@pytest.mark.parametrize(
    "name", ["unused-suppression", "UNUSED-SUPPRESSION", " unused_suppression ", "gc008"]
)
def test_explain_takes_a_rule_s_name_as_well_as_its_code(name: str) -> None:
    exit_code, out, err = _explain(name)
    assert (exit_code, err) == (ExitCode.CLEAN, "")
    assert out.splitlines()[0] == "GC008 unused-suppression (warning)"


def test_explain_takes_every_rule_s_name() -> None:
    for rule in RULES.values():
        exit_code, out, _ = _explain(rule.name)
        assert exit_code == ExitCode.CLEAN
        assert out.splitlines()[0].startswith(f"{rule.code} {rule.name} ")


def test_explain_unknown_code_exits_2_with_one_line() -> None:
    exit_code, out, err = _explain("GC999")
    assert exit_code == ExitCode.ERROR
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("gradcheck: error: unknown rule 'GC999'; did you mean GC209 (")
    assert err.rstrip().endswith("(--explain all lists every rule by code and name)")


def test_explain_misspelt_name_is_one_line_with_the_close_matches() -> None:
    exit_code, out, err = _explain("unused-supression")
    assert (exit_code, out) == (ExitCode.ERROR, "")
    assert err == (
        "gradcheck: error: unknown rule 'unused-supression'; did you mean GC008 "
        "(unused-suppression)? (--explain all lists every rule by code and name)\n"
    )


def test_explain_nothing_close_lists_the_known_codes() -> None:
    exit_code, out, err = _explain("xyzzy")
    assert (exit_code, out) == (ExitCode.ERROR, "")
    (line,) = err.splitlines()
    assert line.startswith("gradcheck: error: unknown rule 'xyzzy'; known codes: GC001-")


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
