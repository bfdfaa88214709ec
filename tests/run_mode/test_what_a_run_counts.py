"""What a run counts: a gradient request reached several times in one traced step (a critic's
d_steps loop) is one request, whatever its graph reads by the later passes; a strategy's own
variable and the components of mirrored weights are not variables no request trains (GC207)."""

from __future__ import annotations

import json
from pathlib import Path

from gradcheck_cli.cli import run_command
from tests.cli_runs import invoke

RUN_SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "run"
SCRIPT = RUN_SCRIPTS / "critic_loop.py"


def _line(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def test_a_critic_loop_is_one_request() -> None:
    code, out, err = invoke(run_command, [str(SCRIPT), "-f", "json"])
    assert code == 0, err
    reports = json.loads(out)
    lines = [report["source"]["request"]["location"]["line"] for report in reports]
    assert lines == [
        _line("tape.gradient(d_loss, critic.trainable_variables)"),
        _line("tape.gradient(g_loss, generator.trainable_variables)"),
    ]
    critic = [v["name"] for v in reports[0]["variables"]]
    assert len(critic) == 4 and all(name.startswith("critic/") for name in critic)


def test_a_mirrored_fit_has_no_variable_never_requested() -> None:
    code, out, err = invoke(run_command, [str(RUN_SCRIPTS / "mirrored_fit.py"), "-f", "json"])
    assert code == 0, err
    report = json.loads(out)
    assert not [f for f in report["findings"] if f["code"] == "GC207"], report["findings"]
    assert {v["status"] for v in report["variables"]} == {"ok"}
