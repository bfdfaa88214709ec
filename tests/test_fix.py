"""`--fix` and `--diff` on copies of real scripts, as a user runs them: the fixes that are code
are written (or printed as a diff that `git apply` takes) only once gradcheck's check of the
fixed copy finds each variable trained, and TensorFlow then gives every fixed variable a
gradient; advice in words never touches a file, and `--diff` writes nothing."""

from __future__ import annotations

import difflib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gradcheck_cli.cli import command, run_command
from gradcheck_cli.fixing import FileChange, write_changes
from tests.cli_runs import Ran, invoke
from tests.oracle import dead_in_script, start_dead_in_script

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "scripts"
# Script -> the variables its fixes that are code give a gradient (and the kind of fix).
FIXED = {
    "faulty_weights_tf1.py": {"hidden1/weights_i": "the straight-through estimator"},
    "module_tf2.py": {"output/kernel": "the straight-through estimator"},
    "cond_branch_cut.py": {"threshold": "the straight-through estimator"},
    # One rounding cuts both variables: the rounding itself goes straight through.
    "rounded_probabilities.py": {
        "kernel": "the straight-through estimator",
        "bias": "the straight-through estimator",
    },
    "argmax_as_value.py": {"kernel": "a soft-argmax"},
    "thresholded_dice.py": {"kernel": "a soft threshold"},
    "cond_lambda_comparison.py": {"threshold": "a soft threshold"},
    "override_wrong_key.py": {
        "w": 'the gradient_override_map keyed by "Round"',
        "scale": 'the gradient_override_map keyed by "Round" and the tf.stop_gradient removed',
    },
    # The stop_gradient on the quantiser's scale is on another path: it stays.
    "override_scale_kept.py": {"v": 'the gradient_override_map keyed by "Round"'},
    "operand_stop.py": {"bias": "the tf.stop_gradient removed"},
    "uses_scaling.py": {"kernel": "the tf.stop_gradient removed"},
    # Dead variables whose fixes are words only: the file is left as it is.
    "words_only.py": {},
    "deep_stop_gradient.py": {},  # a teacher under tf.stop_gradient: intended, not a bug
}
SOURCES = {
    "faulty_weights_tf1.py": REPO / "sample_models",
    "module_tf2.py": REPO / "sample_models",
    "operand_stop.py": SCRIPTS / "fix",
    "uses_scaling.py": SCRIPTS / "fix",
    "scaling.py": SCRIPTS / "fix",
    "words_only.py": SCRIPTS / "fix",
}
_TOLD = re.compile(r"^gradcheck: (fixed|would fix) (\S+) at (\S+):(\d+): (.+)$", re.MULTILINE)


def _copies(folder: Path) -> list[Path]:
    """Every script of FIXED (and the helper module one imports) copied into `folder`."""
    for name in [*FIXED, "scaling.py"]:
        shutil.copy(SOURCES.get(name, SCRIPTS) / name, folder / name)
    return [folder / name for name in FIXED]


def _told(stderr: str) -> dict[str, dict[str, str]]:
    """Per file, the variables gradcheck says it fixed, with the kind of fix."""
    told: dict[str, dict[str, str]] = {}
    for _, variable, file, _, what in _TOLD.findall(stderr):
        told.setdefault(Path(file).name, {})[variable] = what
    return told


def _expected_files() -> dict[str, dict[str, str]]:
    expected = {name: fixed for name, fixed in FIXED.items() if fixed}
    expected["scaling.py"] = expected.pop("uses_scaling.py")  # the cut is in the helper
    return expected


@pytest.fixture(scope="module")
def fixed_copies(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Ran]:
    """The scripts before (`originals`) and after one `gradcheck ... --fix` over all of them."""
    originals = tmp_path_factory.mktemp("originals")
    _copies(originals)
    folder = tmp_path_factory.mktemp("fixed")
    scripts = _copies(folder)
    ran = invoke(command, [*scripts, "--loss", "loss", "--fix", "-q", "--no-cache"])
    return originals, folder, ran


def test_fix_writes_each_verified_fix_and_tensorflow_then_trains_the_variable(
    fixed_copies: tuple[Path, Path, Ran],
) -> None:
    originals, folder, ran = fixed_copies
    returncode, stdout, stderr = ran
    assert _told(stderr) == _expected_files(), stderr
    # What is left is reported: the teacher (intended), the unused variable, the others.
    assert returncode == 1, stderr
    lines = {Path(line.split(":")[0]).name: line for line in stdout.splitlines()}
    assert "every trainable variable gets gradient" in lines["faulty_weights_tf1.py"]
    assert "1 unused" in lines["words_only.py"], stdout
    changed = {
        path.name
        for path in folder.glob("*.py")
        if path.read_text() != (originals / path.name).read_text()
    }
    assert changed == set(_expected_files())
    pending = {
        name: (
            start_dead_in_script(str(originals / name), "loss"),
            start_dead_in_script(str(folder / name), "loss"),
        )
        for name, fixed in FIXED.items()
        if fixed
    }
    for name, (before, after) in pending.items():
        was, now = before.result(), after.result()
        for variable in FIXED[name]:
            short = variable.split("/")[-1]
            key = variable if variable in was else short
            assert was[key] == "none", (name, variable, was)
            # A gradient, not None (zeros where a tf.cond took the other branch this time).
            assert now[key] in ("gradient", "zero"), (name, variable, now)
            assert now[key] == "gradient" or name == "cond_lambda_comparison.py"


def test_fix_leaves_every_other_line_as_it_was(fixed_copies: tuple[Path, Path, Ran]) -> None:
    originals, folder, _ = fixed_copies
    for name in _expected_files():
        before = (originals / name).read_text().splitlines()
        after = (folder / name).read_text().splitlines()
        changes = [
            (before[i1:i2], after[j1:j2])
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after).get_opcodes()
            if tag != "equal"
        ]
        # One change per cut the fix rewrites (the override map and its stop_gradient: two).
        assert 1 <= len(changes) <= 2, (name, changes)
    kept = (folder / "override_scale_kept.py").read_text()
    assert "E = tf.stop_gradient(tf.reduce_mean(tf.abs(v)))" in kept
    assert 'gradient_override_map({"Round": "Identity"})' in kept
    rounded = (folder / "rounded_probabilities.py").read_text()
    assert "bits = probs + tf.stop_gradient(tf.round(probs) - probs)" in rounded
    # The lone stop_gradient of an operand keeps the operand's meaning.
    assert (
        "return tf.reduce_mean((outputs + bias) * 3.0 + outputs)"
        in (folder / "operand_stop.py").read_text()
    )


def test_diff_prints_what_fix_writes_and_writes_nothing(
    fixed_copies: tuple[Path, Path, Ran], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, fixed_folder, _ = fixed_copies
    _copies(tmp_path)
    monkeypatch.chdir(tmp_path)
    targets = [Path("faulty_weights_tf1.py"), Path("override_wrong_key.py")]
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    returncode, diff, stderr = invoke(command, [*targets, "--loss", "loss", "--diff", "-q"])
    assert returncode == 1, stderr
    assert {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()} == before
    assert "gradcheck: after the diff: no dead variable left" in stderr
    assert _told(stderr) == {
        name: FIXED[name] for name in ("faulty_weights_tf1.py", "override_wrong_key.py")
    }
    assert diff.startswith("--- a/faulty_weights_tf1.py\n+++ b/faulty_weights_tf1.py\n")
    # The diff, applied by git, gives the files `--fix` wrote.
    subprocess.run(["git", "apply"], input=diff, text=True, check=True)
    for path in targets:
        assert path.read_text() == (fixed_folder / path.name).read_text()


def test_run_mode_fixes_the_training_script_at_its_first_step(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    shutil.copy(REPO / "sample_models" / "faulty_weights_tf1.py", script)
    returncode, stdout, stderr = invoke(run_command, [script, "--fix", "-q"])
    assert returncode == 0, stderr
    assert _told(stderr) == {"train.py": FIXED["faulty_weights_tf1.py"]}
    assert "every trainable variable gets gradient" in stdout
    assert "weights_i + tf.stop_gradient(" in script.read_text()
    # TensorFlow's own gradients on the file as --fix left it.
    assert dead_in_script(str(script), "loss")["hidden1/weights_i"] == "gradient"


def test_advice_in_words_only_touches_no_file(tmp_path: Path) -> None:
    script = tmp_path / "words_only.py"
    shutil.copy(SCRIPTS / "fix" / "words_only.py", script)
    text = script.read_bytes()
    returncode, _, stderr = invoke(command, [script, "--loss", "loss", "--fix", "-q"])
    assert returncode == 1
    assert "no fix gradcheck can write: the report's fixes are in words" in stderr
    assert script.read_bytes() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["words_only.py"]


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = 2\n")
    change = FileChange(str(script), before="x = 1\n", after="x = 3\n")
    problems = write_changes([change])
    assert len(problems) == 1
    assert problems[0].endswith(
        "train.py changed since gradcheck read it; nothing written (run the check again)"
    )
    assert script.read_text() == "x = 2\n"
    # One stale file among several: none of them is written.
    other = tmp_path / "other.py"
    other.write_text("y = 1\n")
    fresh = FileChange(str(other), before="y = 1\n", after="y = 2\n")
    assert len(write_changes([fresh, change])) == 1
    assert other.read_text() == "y = 1\n"
    other.unlink()
    written = FileChange(str(script), before="x = 2\n", after="x = 3\n")
    script.chmod(0o640)
    assert write_changes([written], [tmp_path]) == []  # the folder of the named script
    assert script.read_text() == "x = 3\n"
    assert script.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--fix", "--diff"], "--fix writes the fixes and --diff only prints them: choose one"),
        (["--diff", "-o", "report.txt"], "--diff prints the diff on stdout: it writes no report"),
        (["--fix", "--write-baseline", "b.json"], "--fix and --write-baseline: fix first"),
    ],
)
def test_flags_that_cannot_go_with_fix_are_one_line(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    script = tmp_path / "words_only.py"
    shutil.copy(SCRIPTS / "fix" / "words_only.py", script)
    returncode, stdout, stderr = invoke(command, [script, "--loss", "loss", *flags])
    assert returncode == 2
    assert stdout == ""
    assert stderr.count("\n") == 1 and message in stderr


def test_a_model_that_cannot_be_checked_is_one_line_with_fix(tmp_path: Path) -> None:
    missing = tmp_path / "missing.py"
    returncode, stdout, stderr = invoke(command, [missing, "--loss", "loss", "--fix"])
    assert returncode == 2
    assert stdout == ""
    assert stderr == f"gradcheck: error: {missing}: no such file or directory\n"


def test_the_report_tells_what_fix_would_write_in_json_and_on_the_terminal(
    fixed_copies: tuple[Path, Path, Ran], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, fixed_folder, _ = fixed_copies
    monkeypatch.chdir(tmp_path)
    script = Path("faulty_weights_tf1.py")  # as the user types it, in the working directory
    shutil.copy(SOURCES["faulty_weights_tf1.py"] / script.name, script)
    returncode, stdout, _ = invoke(command, [script, "--loss", "loss", "-f", "json"])
    assert returncode == 1
    report = json.loads(stdout)
    assert report["summary"]["fixable"] == 1
    [dead] = [v for v in report["variables"] if v["status"] == "blocked"]
    code_fix = dead["code_fix"]
    assert code_fix["kind"] == "the straight-through estimator"
    [edit] = code_fix["edits"]
    # Every file of the report is written as the user named it: the edit's as the cut's.
    assert edit["file"] == dead["blockers"][-1]["location"]["file"] == "faulty_weights_tf1.py"
    # The edit, made by hand where it says, is the file `--fix` wrote.
    lines = script.read_text().splitlines(keepends=True)
    lines[edit["line"] - 1] = lines[edit["line"] - 1].replace(edit["original"], edit["replacement"])
    assert "".join(lines) == (fixed_folder / script.name).read_text()
    _, terminal, _ = invoke(command, [script, "--loss", "loss", "--color", "never"])
    assert terminal.rstrip().endswith(
        "1 dead variable can be fixed by gradcheck: run it again with --fix to write its fix "
        "(--diff shows the change first)"
    )
