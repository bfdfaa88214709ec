"""What a run counts: a gradient request reached several times in one traced step (a critic's
d_steps loop) is one request, whatever its graph reads by the later passes; a strategy's own
variable and the components of mirrored weights are not variables no request trains (GC207)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gradcheck_cli.cli import run_command
from tests import forked_python
from tests.cli_runs import invoke

RUN_SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "run"
SCRIPT = RUN_SCRIPTS / "critic_loop.py"


def _agrees_with_tensorflow(script: Path, reports: list[dict[str, Any]], tmp_path: Path) -> None:
    """TensorFlow's own run of the script (tests.run_oracle, a request per call site) makes
    the same requests, and gives None to exactly the variables each report calls dead."""
    out = tmp_path / "oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], timeout=300)
    answer = json.loads(out.read_text())
    assert answer["error"] is None, answer["error"]
    requests = answer["requests"]
    assert [(r["location"] or {}).get("line") for r in requests] == [
        (report["source"]["request"]["location"] or {}).get("line") for report in reports
    ]
    for report, request in zip(reports, requests, strict=True):
        dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
        assert dead == set(request["none"])


def _line(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def test_a_critic_loop_is_one_request(tmp_path: Path) -> None:
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
    _agrees_with_tensorflow(SCRIPT, reports, tmp_path)


def test_a_mirrored_fit_has_no_variable_never_requested(tmp_path: Path) -> None:
    script = RUN_SCRIPTS / "mirrored_fit.py"
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == 0, err
    report = json.loads(out)
    assert not [f for f in report["findings"] if f["code"] == "GC207"], report["findings"]
    assert {v["status"] for v in report["variables"]} == {"ok"}
    _agrees_with_tensorflow(script, [report], tmp_path)
