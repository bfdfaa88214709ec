"""Public reports of variables that get no gradient (GitHub issues, Stack Overflow), reproduced
small in tests/public_reports/ (each script names its thread; cases.toml says what TensorFlow and
the thread's answer found). On each, `gradcheck run` agrees with TensorFlow's own gradients
(`--verify`), names exactly the variables the user saw get none, blames every line that must
change, and offers a fix of the kind the answer gave; the answer's own change (`answer`, applied
to a copy) then gives those variables a gradient, as TensorFlow's run of it confirms."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import run_command
from tests import forked_python
from tests.cli_runs import invoke

REPORTS = Path(__file__).resolve().parent / "public_reports"
CASES = tomllib.loads((REPORTS / "cases.toml").read_text())["case"]
NOT_DEAD = frozenset({"ok", "frozen"})


# Under pytest-xdist the cases run in halves, each on one worker that runs only its half's
# checks: one worker running all of them was the suite's longest wait.
HALVES = 2
PARAMS = [
    pytest.param(
        case,
        id=case["name"],
        marks=pytest.mark.xdist_group(f"public reports, half {number % HALVES}"),
    )
    for number, case in enumerate(CASES)
]


class _Reports(dict[str, tuple[int, dict[str, Any]]]):
    """Each case's exit code and report (`gradcheck run NAME.py --verify -f json`), run once,
    when a test first asks for it; its GitHub annotations too (`--also github:NAME.github`),
    as the report's "github" entry."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def __missing__(self, name: str) -> tuple[int, dict[str, Any]]:
        github = self.folder / f"{name}.github"
        args = [REPORTS / f"{name}.py", "--verify", "-f", "json", "--also", f"github:{github}"]
        code, out, err = invoke(run_command, args)
        try:
            document = json.loads(out)
        except json.JSONDecodeError:
            pytest.fail(f"{name}: no JSON (exit {code}):\n{out[-2000:]}\n{err[-3000:]}")
        report = document if isinstance(document, dict) else document[0]
        report["github"] = github.read_text() if github.exists() else ""
        self[name] = (code, report)
        return self[name]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> _Reports:
    return _Reports(tmp_path_factory.mktemp("public_reports"))


def _line_of(script: Path, text: str) -> int:
    lines = [n for n, line in enumerate(script.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, f"{text!r} should be on exactly one line of {script.name}: {lines}"
    return lines[0]


def _dead(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in report["variables"] if v["status"] not in NOT_DEAD]


@pytest.mark.parametrize("case", PARAMS)
def test_the_dead_variables_are_the_ones_tensorflow_gives_none(
    case: dict[str, Any], reports: dict[str, tuple[int, dict[str, Any]]]
) -> None:
    code, report = reports[case["name"]]
    assert code == 1
    codes = {f["code"] for f in report["findings"]}
    assert "GC003" in codes and "GC002" not in codes, report["findings"]
    assert sorted(v["name"] for v in _dead(report)) == sorted(case["dead"])


@pytest.mark.parametrize("case", PARAMS)
def test_every_line_that_must_change_is_blamed(
    case: dict[str, Any], reports: dict[str, tuple[int, dict[str, Any]]]
) -> None:
    _, report = reports[case["name"]]
    script = REPORTS / f"{case['name']}.py"
    blamed = set()
    for variable in _dead(report):
        blamed |= {b["location"]["line"] for b in variable["blockers"] if b["location"]}
        blamed |= {int(n) for n in re.findall(r"\blines? (\d+)", variable.get("fix") or "")}
    missed = [text for text in case["cut_at"] if _line_of(script, text) not in blamed]
    _known(case, "known_line", not missed, f"lines not blamed: {missed}")


@pytest.mark.parametrize("case", PARAMS)
def test_the_fix_is_of_the_kind_the_answer_gave(
    case: dict[str, Any], reports: dict[str, tuple[int, dict[str, Any]]]
) -> None:
    _, report = reports[case["name"]]
    fixes = " ".join((v.get("fix") or "") for v in _dead(report)).lower()
    missing = [word for word in case["fix_words"] if word.lower() not in fixes]
    wrong = [word for word in case.get("fix_not", []) if word.lower() in fixes]
    _known(case, "known_fix", not missing and not wrong, f"missing {missing}, wrong {wrong}")


def _known(case: dict[str, Any], known: str, right: bool, said: str) -> None:
    """Pass when right; a case the corpus records as still wrong (`known_fix = "why"`) is an
    expected failure, and an error once gradcheck gets it right (then the entry goes)."""
    if known not in case:
        assert right, said
    elif right:
        pytest.fail(f"{case['name']} is right now: remove its {known} entry")
    else:
        pytest.xfail(f"{case[known]} ({said})")


@pytest.mark.parametrize("case", PARAMS)
def test_the_answers_change_gives_those_variables_a_gradient(
    case: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "tensorflow.json"
    fixed = tmp_path / f"{case['name']}.py"
    text = (REPORTS / fixed.name).read_text()
    for old, new in case["answer"]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    fixed.write_text(text)
    forked_python.run(["-m", "tests.run_oracle", str(out), str(fixed)], cwd=tmp_path)
    answer = json.loads(out.read_text())
    first = answer["requests"][0]
    assert first["none"] == [], first


@pytest.mark.parametrize("case", PARAMS)
def test_the_github_annotations_carry_the_same_fix(
    case: dict[str, Any], reports: dict[str, tuple[int, dict[str, Any]]]
) -> None:
    _, report = reports[case["name"]]
    annotations = report["github"].replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")
    for variable in _dead(report):
        if variable.get("fix"):  # a variable gradcheck offers no fix for has none to carry
            assert f"fix: {variable['fix']}" in annotations, (variable["name"], annotations[-3000:])
