"""The report's one-line forms on real runs: `-q` names each gradient request by its line and
call, without nested parentheses; several models (or requests) end with one overall line whose
counts are the JSON summaries' own, summed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from gradcheck_cli.cli import command, run_command
from tests.cli_runs import invoke

REPO = Path(__file__).resolve().parents[1]
GAN = REPO / "tests" / "scripts" / "run" / "gan_train_step.py"
SEED = REPO / "sample_models" / "faulty_weights_tf1.py"
FIXED = REPO / "sample_models" / "faulty_weights_fixed.py"
# A verdict (`... is dead`), then its counts in one pair of parentheses.
_COUNTS = (
    r"\((?P<ok>\d+) ok, (?P<blocked>\d+) blocked, (?P<unused>\d+) unused, (?P<frozen>\d+) frozen"
)


def _requests(script: Path) -> list[int]:
    lines = script.read_text().splitlines()
    return [number for number, text in enumerate(lines, 1) if "tape.gradient(" in text]


def _deepest_parentheses(line: str) -> int:
    depth = deepest = 0
    for character in line:
        depth += {"(": 1, ")": -1}.get(character, 0)
        deepest = max(deepest, depth)
    return deepest


def _summaries(document: Path) -> list[dict[str, int]]:
    loaded = json.loads(document.read_text())
    return [item["summary"] for item in (loaded if isinstance(loaded, list) else [loaded])]


@pytest.mark.heavy
def test_quiet_run_names_each_request_by_its_line_and_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    document = tmp_path / "run.json"
    code, out, _ = invoke(run_command, [GAN, "-q", "--also", f"json:{document}"])
    assert code == 1  # the generator's step is dead (TensorFlow agrees: test_run_mode)
    script = os.path.relpath(GAN)
    discriminator, generator = _requests(GAN)
    summaries = _summaries(document)
    lines = out.splitlines()
    assert len(lines) == len(summaries) == 2
    for line, number, summary in zip(lines, (discriminator, generator), summaries, strict=True):
        assert line.startswith(f"{script}:{number}: GradientTape.gradient: ")
        assert _deepest_parentheses(line) == 1, line
        counts = re.search(_COUNTS, line)
        assert counts is not None, line
        assert {key: int(value) for key, value in counts.groupdict().items()} == {
            key: summary[key] for key in ("ok", "blocked", "unused", "frozen")
        }
    assert "every trainable variable gets gradient" in lines[0]
    dead = summaries[1]["dead"]
    assert dead > 0 and f"{dead} of {summaries[1]['trainable']} trainable variables" in lines[1]


@pytest.mark.heavy
def test_a_run_with_several_requests_ends_with_one_overall_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    document = tmp_path / "run.json"
    code, out, _ = invoke(run_command, [GAN, "--color", "never", "--also", f"json:{document}"])
    assert code == 1
    summaries = _summaries(document)
    dead = sum(summary["dead"] for summary in summaries)
    having = sum(1 for summary in summaries if summary["dead"])
    last = out.splitlines()[-1]
    assert last.startswith(f"overall: {dead} dead variables in {having} of 2 gradient requests (")
    assert _deepest_parentheses(last) == 1


@pytest.mark.heavy
def test_several_models_end_with_the_sum_of_their_json_summaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    document = tmp_path / "models.json"
    models = [SEED, FIXED, SEED]
    flags = ["--loss", "loss", "--color", "never", "--also", f"json:{document}"]
    code, out, _ = invoke(command, [*models, *flags])
    assert code == 1  # the seed's weights_i is dead (TensorFlow agrees: test_sample_models)
    summaries = _summaries(document)
    summed = {key: sum(summary[key] for summary in summaries) for key in summaries[0]}
    assert summed["dead"] == 2 and summed["allowed"] == summed["suppressed"] == 0
    counts = ", ".join(f"{summed[key]} {key}" for key in ("ok", "blocked", "unused", "frozen"))
    assert out.splitlines()[-1] == f"overall: 2 dead variables in 2 of 3 models ({counts})"
    # Each model's own verdict stays as it reads alone.
    assert out.count("1 of 4 trainable variables is dead (") == 2
    # Accepted ones are counted as the JSON counts them.
    accepted = tmp_path / "accepted.json"
    flags = ["--loss", "loss", "--allow-dead", "weights_i", "--also", f"json:{accepted}"]
    code, out, _ = invoke(command, [SEED, FIXED, *flags])
    assert code == 0
    allowed = sum(summary["allowed"] for summary in _summaries(accepted))
    assert allowed == 1
    assert out.splitlines()[-1].startswith(
        "overall: no dead trainable variable beyond those allowed, in 2 models ("
    )
    assert out.splitlines()[-1].endswith(f"; {allowed} dead but allowed)")
