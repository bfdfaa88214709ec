"""One cause, one story, one wording, whatever the form: a layer built in __init__ and never
called is told, and fixed, in the same words checked as a plain script and as a run."""

from __future__ import annotations

import json
from pathlib import Path

from gradcheck_cli.cli import command, run_command
from tests.cli_runs import invoke

SCRIPT = Path(__file__).resolve().parent / "scripts" / "wording" / "unused_attribute_layer.py"
FIX = (
    "call self.extra in the forward pass, or delete it; if it is meant to stay untrained, set "
    "self.extra.trainable = False"
)


def test_an_unused_layer_is_told_in_one_wording_by_both_forms() -> None:
    plain = invoke(command, [str(SCRIPT), "--loss", "step", "--verify", "-f", "json"])
    run = invoke(run_command, [str(SCRIPT), "--verify", "-f", "json"])
    stories = []
    for code, out, err in (plain, run):
        assert code == 1, out + err
        report = json.loads(out)
        codes = {f["code"] for f in report["findings"]}
        assert "GC003" in codes and "GC002" not in codes  # TensorFlow agrees
        dead = [v for v in report["variables"] if v["status"] == "unused"]
        assert sorted(v["name"].rsplit("/", 1)[-1] for v in dead) == ["bias", "kernel"]
        told = {
            f["message"]
            for f in report["findings"]
            if f.get("variable") in {v["name"] for v in dead}
        }
        stories.append(({v["fix"] for v in dead}, {m.split(": ", 1)[-1] for m in told}))
    assert stories[0] == stories[1]
    assert stories[0][0] == {FIX} and stories[0][1] == {"the loss function never reads it"}
