"""What a newcomer meets first, as they meet it: a typo'd command runs nothing, a script that
does not parse is one line before TensorFlow is imported, `gradcheck run` answers --version
and --explain as the plain command does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAINS_AT_IMPORT = """
from pathlib import Path
Path("trained.marker").write_text("the script ran")
"""


def _gradcheck(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gradcheck_cli", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _imported(ran: subprocess.CompletedProcess[str]) -> set[str]:
    """The top-level packages the process imported (`-X importtime` lists each on stderr)."""
    return {
        line.split("|")[-1].strip().split(".")[0]
        for line in ran.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def _said(ran: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in ran.stderr.splitlines() if not line.startswith("import time:")]


def test_a_typo_of_run_is_a_usage_error_and_runs_nothing(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAINS_AT_IMPORT)
    for typo in ("runn", "rnu", "Run"):
        ran = _gradcheck(typo, "train.py", cwd=tmp_path)
        assert ran.returncode == 2, ran.stderr
        assert _said(ran) == [
            f"gradcheck: error: {typo}: no such file, folder or command; did you mean "
            "`gradcheck run train.py`?"
        ]
        assert not (tmp_path / "trained.marker").exists()
        assert "tensorflow" not in _imported(ran)


def test_a_script_that_does_not_parse_is_one_line_before_tensorflow(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\ndef loss(:\n    return 1\n")
    for command in (["run", "train.py"], ["train.py", "--loss", "loss"]):
        ran = _gradcheck(*command, cwd=tmp_path)
        assert ran.returncode == 2, ran.stderr
        assert _said(ran) == [
            "gradcheck: error: train.py:3: invalid syntax: Python cannot parse the script "
            "(SyntaxError), so gradcheck ran none of it"
        ]
        assert "tensorflow" not in _imported(ran), command


def test_run_answers_version_and_explain_as_the_plain_command_does(tmp_path: Path) -> None:
    for asked in (["--version"], ["--explain", "GC101"]):
        plain = _gradcheck(*asked, cwd=tmp_path)
        run = _gradcheck("run", *asked, cwd=tmp_path)
        assert plain.returncode == run.returncode == 0, run.stderr
        assert run.stdout == plain.stdout and run.stdout.strip(), asked


def test_errors_name_the_script_as_the_user_typed_it(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\nw = tf.Variable(1.0)\n")
    ran = _gradcheck("train.py", "--loss", "nope", cwd=tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert _said(ran)[-1] == "gradcheck: error: no loss named 'nope' in train.py; candidates: none"


def test_a_keras_fit_is_named_as_the_script_calls_it() -> None:
    script = "tests/scripts/run/fit_picks_by_argmax.py"
    ran = _gradcheck("run", script, "-f", "json", cwd=REPO)
    assert ran.returncode == 1, ran.stderr
    source = json.loads(ran.stdout)["source"]
    lines = (REPO / script).read_text().splitlines()
    line = lines.index("model.fit(x, y, epochs=1, verbose=0)") + 1
    assert source["loss"] == f"model.fit at {script}:{line}"
    assert source["request"] == {"api": "model.fit", "location": {"file": script, "line": line}}
