"""The terminal report as a user at an 80-column terminal reads it: `gradcheck run` on the seed
sample, in a real pseudo-terminal (pexpect), its lines folded between words and tokens."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import sys
import tokenize
from pathlib import Path

import pexpect
import pytest
from rich.cells import cell_len

REPO = Path(__file__).resolve().parents[1]
SAMPLE = "sample_models/faulty_weights_tf1.py"
COLUMNS = 80
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_GUTTER = re.compile(r"^ {4}(?P<number>[ \d]{5}) \| (?P<code>.*)$")


def _on_a_terminal(arguments: list[str], scratch: Path) -> tuple[int, str]:
    """gradcheck on a pseudo-terminal of COLUMNS columns (stderr, its status line and the
    script's output, to a file): its exit code and what the terminal was sent."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")
    }
    environment.update(TERM="xterm", TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    errors = scratch / "stderr.txt"
    command = 'exec "$0" -m gradcheck_cli "$@" 2>"$GRADCHECK_TEST_STDERR"'
    child = pexpect.spawn(
        "/bin/sh",
        ["-c", command, sys.executable, *arguments],
        cwd=REPO,
        env={**environment, "GRADCHECK_TEST_STDERR": str(errors)},
        dimensions=(24, COLUMNS),
        encoding="utf-8",
        timeout=300,
    )
    shown = child.read()
    child.close()
    assert child.exitstatus is not None, errors.read_text()
    # The terminal's line discipline sends \r\n for each \n.
    return child.exitstatus, shown.replace("\r\n", "\n")


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, dict]:
    """The coloured report at 80 columns, the same report as plain text, and its JSON (one
    object: the sample asks for gradients once)."""
    scratch = tmp_path_factory.mktemp("terminal")
    document = scratch / "report.json"
    code, shown = _on_a_terminal(["run", SAMPLE, "--also", f"json:{document}"], scratch)
    assert code == 1, shown  # the sample's weights_i is dead (TensorFlow agrees: test_cli)
    return shown, _CONTROL.sub("", shown), json.loads(document.read_text())


@pytest.mark.heavy
def test_no_line_is_wider_than_the_terminal_or_ends_in_a_space(seed_run: tuple) -> None:
    _, text, _ = seed_run
    lines = text.splitlines()
    assert lines[0].startswith(f"gradcheck {SAMPLE} (run)")
    assert any(line.startswith("1 of 4 trainable variables is dead") for line in lines[-4:])
    # The closing hint that --fix can write the fix, folded at the width like any prose.
    assert lines[-1].endswith("(--diff shows the change first)")
    assert all(cell_len(line) <= COLUMNS for line in lines), max(lines, key=cell_len)
    assert all(line == line.rstrip() for line in lines)
    # The table is there, its rows without the spaces rich pads their last cell with.
    assert "hidden1/biases          ok       [64]" in lines


@pytest.mark.heavy
def test_every_source_line_folds_between_tokens_under_its_gutter(seed_run: tuple) -> None:
    _, text, _ = seed_run
    source = (REPO / SAMPLE).read_text().splitlines()
    shown = _source_lines(text.splitlines())
    assert 36 in shown and len(shown[36]) > 1  # the seed's long line, folded
    for number, parts in shown.items():
        # Read back as Python, the folded line is the file's line: no name split across lines.
        assert _tokens("\n".join(part.strip() for part in parts)) == _tokens(source[number - 1])
        assert all(part.startswith(" ") for part in parts[1:])  # indented under the code


@pytest.mark.heavy
def test_the_fix_folds_inside_its_brackets_and_still_pastes(seed_run: tuple) -> None:
    _, text, document = seed_run
    (dead,) = [v for v in document["variables"] if v["name"] == "hidden1/weights_i"]
    code = dead["fix"].splitlines()[-1].strip()  # the line to paste, as JSON gives it whole
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.strip().startswith("weights = ")))
    folded = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * 10):
            break
        folded.append(line)
    assert len(folded) > 1 and not folded[0].endswith("\\")
    pasted = "\n".join(line[6:] for line in folded)  # as copied from the terminal
    assert ast.dump(ast.parse(pasted)) == ast.dump(ast.parse(code))


@pytest.mark.heavy
def test_the_source_line_is_not_dim(seed_run: tuple) -> None:
    shown, _, _ = seed_run
    (line,) = [line for line in shown.splitlines() if " 40 | " in _CONTROL.sub("", line)]
    gutter, code = line.split("| ", 1)
    assert "\x1b[2m" in gutter  # the line number is dim
    # The code is in the terminal's own style: no escape but the gutter's reset before it.
    assert _CONTROL.sub("", code) == code.removeprefix("\x1b[0m")
    assert code.removeprefix("\x1b[0m").strip() == "weights_fx = tf.cast(weights_fx_t,tf.int32)"


@pytest.mark.heavy
def test_the_last_screen_holds_the_dead_variable_s_story(tmp_path: Path) -> None:
    """A dead variable and a warning: the warning goes first, so what a 24-line terminal still
    shows at the end is the dead variable's story, its cut and its rule, above the summary."""
    script = "tests/scripts/run/fit_picks_by_argmax.py"
    code, shown = _on_a_terminal(["run", script], tmp_path)
    assert code == 1, shown
    lines = _CONTROL.sub("", shown).splitlines()
    assert any(line.startswith("  GC202 at ") for line in lines)  # the warning, scrolled away
    screen = "\n".join(lines[-24:])
    assert "blocked picker/kernel" in screen
    assert "cut 1 ArgMax (GC103 non_differentiable_op)" in screen
    assert "choice = tf.argmax(scores, axis=-1)" in screen  # the line that cuts it
    assert "GC202" not in screen


def _source_lines(lines: list[str]) -> dict[int, list[str]]:
    """Each numbered source line the report shows, with the lines it folds into."""
    shown: dict[int, list[str]] = {}
    number = None
    for line in lines:
        match = _GUTTER.match(line)
        if match is None:
            number = None
        elif match["number"].strip():
            number = int(match["number"])
            shown[number] = [match["code"]]
        elif number is not None:
            shown[number].append(match["code"])
    return shown


def _tokens(source: str) -> list[tuple[int, str]]:
    layout = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    return [
        (token.type, token.string)
        for token in tokenize.generate_tokens(io.StringIO(source.strip()).readline)
        if token.type not in layout
    ]
