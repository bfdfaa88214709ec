"""tests/scripts/watch/aborted_steps.py run in one process per Keras, and what its stderr says:
for each step that fails after asking for gradients (Keras's "No gradients provided for any
variable", or the step's own code failing on a None), gradcheck's report, then the error."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "watch" / "aborted_steps.py"
SECONDS = 300
LAST = "watch eager clip"  # the step the script runs uncaught, last, watched without a block
# The steps whose own code fails on a None gradient before Keras's optimizer sees it.
OWN_FAILURES = ("watch traced clip", "watch block clip", LAST)
# A row of the terminal report's variable table: name, status, shape.
_ROW = re.compile(r"^(\S+)\s+([a-z]+)\s+\[[\d, ]*\]", re.MULTILINE)


@dataclass(frozen=True)
class AbortedSteps:
    code: int
    stdout: str
    stderr: str
    facts: dict[str, Any]

    def before(self, name: str) -> str:
        """What gradcheck said while the step ran, before its error was caught."""
        return self.stderr.split(f"\n-- {name}\n")[1].split(f"-- raised {name}\n")[0]

    def raised(self, name: str) -> str:
        """The traceback of what the step raised, printed once it was caught."""
        return self.stderr.split(f"\n-- raised {name}\n")[1].split("\n-- ")[0]

    def last(self) -> str:
        """The end of stderr, from the step run uncaught."""
        return self.stderr.split(f"\n-- {LAST}\n")[1]


def run_aborted_steps(keras: str, folder: Path) -> AbortedSteps:
    """The script on Keras `keras` ("3", or "2": tf_keras), from the repository's root (the
    reports name paths relative to it)."""
    out = folder / f"aborted-keras{keras}.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "NO_COLOR": "1",
        "GRADCHECK_TEST_KERAS": keras,
        "GRADCHECK_TEST_OUT": str(out),
    }
    ran = subprocess.run(
        [sys.executable, str(SCRIPT)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SECONDS,
    )
    facts = json.loads(out.read_text()) if out.exists() else {}
    return AbortedSteps(ran.returncode, ran.stdout, ran.stderr, facts)


def table(report: str) -> dict[str, str]:
    """The report's variable table: name -> status."""
    return dict(_ROW.findall(report))


def assert_reported_before_the_error(run: AbortedSteps) -> None:
    """Every step: gradcheck's report while it ran, naming as dead exactly the variables
    TensorFlow's tape gives None; then the very error it raises without gradcheck."""
    __tracebackhide__ = True
    facts = run.facts
    assert facts, run.stderr
    dead = facts["none"]
    assert dead == ["body/bias", "body/kernel", "head/bias", "head/kernel"]  # TensorFlow's word
    for name, plain in facts["plain"].items():
        said = run.before(name) if name != LAST else run.last().split("\nTraceback")[0]
        what = "fit" if name.startswith("callback") else "training"
        ours = [line for line in said.splitlines() if line.startswith("gradcheck")]
        assert ours[:1] == [f"gradcheck: {what} raised {plain[0]} after it asked for gradients"], (
            name,
            said,
        )
        rows = table(said)
        assert sorted(rows) == dead and set(rows.values()) == {"blocked"}, (name, said)
        assert "cut 1 ArgMax (GC103 non_differentiable_op)" in said, (name, said)
        assert "goes on" not in said, (name, said)  # nothing goes on: the step failed
        if name == LAST:
            continue
        # The program sees what it sees without gradcheck: the same error.
        assert facts["checked"][name] == plain, name
        assert run.raised(name).rstrip().endswith(plain[1]), (name, run.raised(name))
        keras_refused = "No gradients provided for any variable" in run.raised(name)
        assert keras_refused == (name not in OWN_FAILURES), (name, run.raised(name))
    assert "DeadVariablesError" not in run.stderr
    assert facts["hooks_gone"]
    # Run uncaught, the last step ends the process with its own error, after the report: its
    # code failed on a None gradient, and no `with` block was there to see it.
    assert run.code == 1 and "trained" not in run.stdout
    error = run.last().split("\nTraceback (most recent call last):\n")[1]
    assert "No gradients provided for any variable" not in error, run.last()
    assert "clip_by_norm" in error, run.last()
    assert error.rstrip().endswith(facts["plain"][LAST][1]), run.last()
