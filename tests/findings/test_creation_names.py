"""A variable's story and fix use the name its creation line binds it to only when that name is
certainly its own: of `w = tf.Variable(1.0); d = tf.Variable(2.0)`, the dead `d` is told as `d`
(the column of its call picks it), never as `w`, which trains. Plain and run forms, judged by
TensorFlow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gradcheck_cli.cli import ExitCode, command, run_command
from tests import forked_python
from tests.cli_runs import Ran, invoke
from tests.oracle import dead_in_script, dead_names

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "two_on_one_line.py"


@pytest.fixture(scope="module")
def plain() -> tuple[Ran, Ran]:
    """The terminal report, then the JSON one, of `gradcheck SCRIPT --loss loss`."""
    terminal = invoke(command, [SCRIPT, "--loss", "loss", "--color", "never"])
    return terminal, invoke(command, [SCRIPT, "--loss", "loss", "-f", "json"])


def _told_as_d(terminal: Ran, report: dict[str, object], dead: set[str]) -> None:
    variables = {v["name"]: v for v in report["variables"]}  # type: ignore[attr-defined]
    assert {n for n, v in variables.items() if v["status"] == "blocked"} == dead
    (name,) = dead
    fix = variables[name]["fix"]
    assert re.search(r"\bd\b", fix) and not re.search(r"\bw\b", fix), fix
    assert "d → ✂ StopGradient" in terminal.stdout
    assert not re.search(r"\bw →", terminal.stdout), terminal.stdout


def test_the_plain_form_tells_the_dead_variable_by_its_own_name(plain: tuple[Ran, Ran]) -> None:
    terminal, machine = plain
    assert terminal.returncode == machine.returncode == ExitCode.DEAD_VARIABLES, terminal.stderr
    tensorflow = dead_in_script(str(SCRIPT), "loss")
    assert tensorflow == {"scale": "gradient", "offset": "none"}
    _told_as_d(terminal, json.loads(machine.stdout), dead_names(tensorflow))


def test_why_takes_each_name_of_the_line_for_its_own_variable() -> None:
    for name, story in (("d", "blocked offset"), ("w", "ok scale")):
        code, out, err = invoke(
            command, [SCRIPT, "--loss", "loss", "--why", name, "--color", "never"]
        )
        assert code == ExitCode.DEAD_VARIABLES, err
        (told,) = [line for line in out.splitlines() if line.startswith(("blocked", "ok"))]
        assert told.startswith(story), out


def test_the_run_form_tells_the_dead_variable_by_its_own_name(tmp_path: Path) -> None:
    terminal = invoke(run_command, [SCRIPT, "--color", "never"])
    machine = invoke(run_command, [SCRIPT, "-f", "json"])
    assert terminal.returncode == machine.returncode == ExitCode.DEAD_VARIABLES, terminal.stderr
    answer = tmp_path / "oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(answer), str(SCRIPT)])
    (request,) = json.loads(answer.read_text())["requests"]
    assert request["variables"] == ["scale", "offset"]
    _told_as_d(terminal, json.loads(machine.stdout), set(request["none"]))
