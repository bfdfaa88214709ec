"""The command line: exit codes, clean stdout, one clear message for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck_cli import cli
from gradcheck_cli.cli import ExitCode, Options, command
from gradcheck_cli.options import CACHE_DIR_VARIABLE, CheckOptions
from gradcheck_cli.reporters import Format
from tests.cli_runs import cli_result, invoke
from tests.error_documents import assert_error_document
from tests.oracle import dead_in_script, dead_names

SCRIPTS = Path(__file__).parent / "scripts"


def _run(*args: str) -> tuple[int, str, str]:
    return invoke(command, args)


def test_dead_variable_exits_1_and_json_follows_the_schema(saved: Path) -> None:
    code, out, err = _run(str(saved), "--loss", "loss", "--format", "json")
    assert code == ExitCode.DEAD_VARIABLES
    report = json.loads(out)
    assert report["schema"] == "gradcheck/1"
    assert set(report) == {"schema", "source", "variables", "findings", "summary"}
    assert report["source"] == {"path": str(saved), "kind": "savedmodel", "loss": "loss"}
    every = {"name", "path", "trainable", "dtype", "shape", "status", "blockers"}
    # A dead variable's explanation: its fix always, the others where they apply.
    explained = {"fix", "still_cut", "side_cuts", "intended", "code_fix"}
    for variable in report["variables"]:
        dead = variable["status"] in ("blocked", "unused")
        assert every | ({"fix"} if dead else set()) <= set(variable)
        assert set(variable) <= every | (explained if dead else set())
        for blocker in variable["blockers"]:
            assert set(blocker) == {"op", "op_type", "reason", "location"}
    for finding in report["findings"]:
        keys = {"code", "severity", "message", "variable", "op", "location"}
        assert set(finding) == keys | ({"suppressed"} if "suppressed" in finding else set())
    counts = {"trainable", "ok", "blocked", "unused", "frozen", "dead", "allowed", "suppressed"}
    assert set(report["summary"]) == counts | {"fixable"}
    # A SavedModel has no script gradcheck could edit.
    assert report["summary"]["fixable"] == 0
    assert not any("code_fix" in variable for variable in report["variables"])
    # `dead`: the dead variables that fail the run (none here is accepted).
    statuses = [v["status"] for v in report["variables"]]
    assert report["summary"]["dead"] == statuses.count("blocked") + statuses.count("unused") > 0
    assert err == ""


def test_every_format_renders(saved: Path) -> None:
    for output_format in Format:
        code, out, _ = _run(str(saved), "--format", output_format.value, "--color", "never")
        assert code == ExitCode.DEAD_VARIABLES and out.strip()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["does/not/exist"], "no such file"),
        (["{saved}", "--loss", "los"], "did you mean 'loss'"),
        (["{here}"], "neither a SavedModel directory, a Python script"),
        (["{tests}"], "not a SavedModel"),
    ],
)
def test_bad_input_exits_2_with_one_message(
    saved: Path, arguments: list[str], message: str
) -> None:
    filled = [
        a.format(saved=saved, here=__file__.replace(".py", ".txt"), tests=Path(__file__).parent)
        for a in arguments
    ]
    if filled[0].endswith(".txt"):
        Path(filled[0]).write_text("")
    try:
        code, out, err = _run(*filled)
    finally:
        Path(__file__.replace(".py", ".txt")).unlink(missing_ok=True)
    assert code == ExitCode.ERROR
    assert out == ""
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def _gradcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", *args], capture_output=True, text=True, check=False
    )


def test_script_prints_never_reach_stdout() -> None:
    script = SCRIPTS / "noisy_tf2.py"
    # --no-cache: a cached result would print nothing of the script.
    result = _gradcheck(str(script), "--loss", "loss", "--format", "json", "--no-cache")
    report = json.loads(result.stdout)
    # Labelled with the script's name, on stderr.
    assert "noisy_tf2.py: the user's script prints this" in result.stderr
    assert "with TensorFlow..." not in result.stderr  # no status line off a terminal
    verdicts = dead_in_script(str(script), "loss")
    assert {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")} == (
        dead_names(verdicts)
    )
    assert result.returncode == (
        ExitCode.DEAD_VARIABLES if dead_names(verdicts) else ExitCode.CLEAN
    )


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("exits.py", "sys.exit"),
        ("raises.py", "raised ZeroDivisionError"),
        ("two_losses.py", "candidate losses"),
    ],
)
def test_script_errors_exit_2(script: str, message: str) -> None:
    code, out, err = _run(str(SCRIPTS / script), "--format", "json")
    assert code == ExitCode.ERROR
    assert_error_document(out, err, str(SCRIPTS / script))
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("script_name", "marker"),
    [("eager_numpy_loss.py", ".numpy()"), ("eager_float_loss.py", "float(")],
)
def test_eager_only_loss_names_the_line_that_leaves_tensorflow(
    script_name: str, marker: str
) -> None:
    script = SCRIPTS / script_name
    _, out, _ = _run(str(script), "--loss", "loss", "--format", "json")
    report = json.loads(out)
    verdicts = dead_in_script(str(script), "loss")
    dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
    assert dead == dead_names(verdicts)
    (left,) = [f for f in report["findings"] if f["code"] == "GC109"]
    line = script.read_text().splitlines()[left["location"]["line"] - 1]
    assert marker in line


def test_quiet_prints_only_the_verdict(saved: Path) -> None:
    full_code, full, _ = _run(str(saved), "--color", "never")
    code, out, _ = _run(str(saved), "-q", "--color", "never")
    assert code == full_code
    assert out.splitlines() == [f"{saved}: {full.splitlines()[-1]}"]
    # One line per model, each naming its model.
    _, both, _ = _run(str(saved), str(saved), "-q", "--color", "never")
    assert both.splitlines() == [f"{saved}: {full.splitlines()[-1]}"] * 2


@pytest.mark.parametrize(
    ("flags", "env", "coloured"),
    [
        (["--color", "always"], {}, True),
        ([], {"FORCE_COLOR": "1"}, True),
        ([], {"FORCE_COLOR": "yes"}, True),
        ([], {"FORCE_COLOR": ""}, False),
        ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        (["--color", "always"], {"NO_COLOR": "1"}, True),
        (["--color", "never"], {"FORCE_COLOR": "1"}, False),
        ([], {}, False),
    ],
)
def test_colour_reaches_a_pipe_when_asked_for(
    saved: Path, flags: list[str], env: dict[str, str], coloured: bool
) -> None:
    # CliRunner's stdout is not a terminal: click strips colour there unless told not to.
    environment = {"NO_COLOR": None, "FORCE_COLOR": None, **env}
    result = cli_result(command, [str(saved), *flags], env=environment)
    assert result.exit_code == ExitCode.DEAD_VARIABLES
    assert ("\x1b[" in result.stdout) is coloured
    quiet = cli_result(command, [str(saved), "-q", *flags], env=environment)
    assert ("\x1b[" in quiet.stdout) is coloured


def test_a_pipe_is_not_wrapped_whatever_columns_says(saved: Path) -> None:
    # COLUMNS sets the width on a terminal; a pipe gets each line whole.
    narrow = cli_result(command, [str(saved), "--color", "never"], env={"COLUMNS": "30"})
    assert max(len(line) for line in narrow.stdout.splitlines()) > 30
    assert narrow.stdout == _run(str(saved), "--color", "never")[1]


def test_why_tells_one_story(saved: Path) -> None:
    full_code, _, _ = _run(str(saved), "--color", "never")
    code, out, _ = _run(str(saved), "--why", "scale", "--color", "never")
    assert code == full_code
    assert " scale shape" in out and "kernel" not in out
    code, out, err = _run(str(saved), "--why", "nope")
    assert code == ExitCode.ERROR and "no variable named 'nope'" in err and out == ""


def test_why_takes_the_short_name_and_the_scope_the_report_prints() -> None:
    """The report prints `weights_i` (its route) and `hidden1/weights_i`; `hidden1` is the
    name scope of the layer, all of whose variables it tells."""
    script = str(Path(__file__).parents[1] / "sample_models/faulty_weights_tf1.py")
    code, out, err = _run(script, "--loss", "loss", "--why", "weights_i", "--color", "never")
    assert code == ExitCode.DEAD_VARIABLES, err
    stories = [line.split()[1] for line in out.splitlines() if line.startswith(("blocked", "ok"))]
    assert stories == ["hidden1/weights_i"]
    code, out, err = _run(script, "--loss", "loss", "--why", "hidden1", "--color", "never")
    assert code == ExitCode.DEAD_VARIABLES, err
    stories = [line.split()[1] for line in out.splitlines() if line.startswith(("blocked", "ok"))]
    assert stories == ["hidden1/weights_i", "hidden1/biases"]


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[Options]:
    """The Options each command line gives `run`, which checks nothing and exits 0."""
    given: list[Options] = []

    def run(options: Options) -> ExitCode:
        given.append(options)
        return ExitCode.CLEAN

    monkeypatch.setattr(cli, "run", run)
    monkeypatch.delenv("GRADCHECK_TIMEOUT", raising=False)
    return given


def test_flags_that_shape_the_check_become_one_options_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seen: list[Options]
) -> None:
    monkeypatch.delenv("GRADCHECK_DEBUG", raising=False)
    flags = ["--verify", "--unsafe-deserialization", "--sum-loss", "--timeout", "30", "--debug"]
    flags.append("--no-cache")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, "/cache")  # the suite's own folder travels too
    code, _, _ = _run("model.py", "--config", str(_empty_config(tmp_path)), *flags, "-v", "-q")
    assert code == ExitCode.CLEAN
    (options,) = seen
    assert options.check == CheckOptions(
        verify=True,
        all_cuts=True,  # --verbose shows the cuts on live variables' other paths too
        unsafe_deserialization=True,
        sum_loss=True,
        timeout=30.0,
        debug=True,
        quiet=True,  # -q also leaves out what the script prints (--debug keeps it)
        cache=False,
        cache_dir="/cache",
    )
    assert options.quiet and options.verbose
    assert "GRADCHECK_DEBUG" not in os.environ  # --debug travels with the options
    _run("model.py", "--config", str(_empty_config(tmp_path)))
    # Progress on stderr, wherever it goes (a status line on a terminal, lines in a log).
    assert seen[1].check == CheckOptions(timeout=600.0, cache_dir="/cache", progress=True)


def _empty_config(folder: Path) -> Path:
    path = folder / "gradcheck.toml"
    path.write_text("")
    return path


@pytest.mark.parametrize("seconds", ["inf", "nan", "1e308", "0", "-1", "86401", "soon"])
def test_timeout_flag_refuses_what_is_not_a_sane_number_of_seconds(seconds: str) -> None:
    code, out, err = _run("model.py", "--timeout", seconds)
    assert (code, out) == (ExitCode.ERROR, "")
    (line,) = err.splitlines()  # one line, in gradcheck's own form
    assert line.startswith("gradcheck: error: Invalid value for '--timeout'")
    assert "86400 (one day)" in line


@pytest.mark.parametrize(
    ("flag", "variable", "seconds"),
    [
        (["--timeout", "9"], "7", 9.0),  # the flag beats the variable
        ([], "7", 7.0),  # the variable beats the config file
        ([], None, 5.0),  # the config file beats the default
    ],
)
def test_timeout_comes_from_the_flag_the_variable_or_the_config_file(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    seen: list[Options],
    flag: list[str],
    variable: str | None,
    seconds: float,
) -> None:
    if variable is not None:
        monkeypatch.setenv("GRADCHECK_TIMEOUT", variable)
    config = tmp_path / "gradcheck.toml"
    config.write_text("timeout = 5\n")
    assert _run("model.py", "--config", str(config), *flag)[0] == ExitCode.CLEAN
    assert [options.check.timeout for options in seen] == [seconds]


def test_a_bad_timeout_variable_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADCHECK_TIMEOUT", "inf")
    code, out, err = _run("model.py")
    assert (code, out) == (ExitCode.ERROR, "")
    (line,) = err.strip().splitlines()
    assert line.startswith("gradcheck: error: GRADCHECK_TIMEOUT: ") and "'inf'" in line


def test_timeout_variable_bounds_a_script_without_the_flag() -> None:
    # The message names the 2 s bound, not the default 600 s: no clock is read.
    result = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", str(SCRIPTS / "bad" / "endless.py")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GRADCHECK_TIMEOUT": "2"},
        timeout=120,
    )
    assert result.returncode == ExitCode.ERROR
    assert "did not finish within 2 s" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args", [("-j", "0"), ("--jobs", "many"), ("--bogus",), ("--format", "yaml")]
)
def test_a_usage_error_is_one_line_in_gradcheck_s_own_form(args: tuple[str, ...]) -> None:
    code, out, err = _run("model.py", *args)
    assert (code, out) == (ExitCode.ERROR, "")
    (line,) = err.splitlines()
    assert line.startswith("gradcheck: error: ")
    assert line.endswith("(gradcheck --help lists the options)")


def test_jobs_are_capped_at_the_cpus_gradcheck_may_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # -j 8 on two CPUs starts two processes: more would only compete for the CPUs, each with
    # TensorFlow's memory. (Missing models: each check is an error outcome, no TensorFlow.)
    from gradcheck_cli import run

    pools: list[int] = []

    def pool(checks: list[run.ModelCheck], processes: int) -> list[run.Outcome]:
        pools.append(processes)
        return [run.check_model(item) for item in checks]

    monkeypatch.setattr(run, "_check_in_pool", pool)
    checks = [run.ModelCheck(str(tmp_path / f"missing_{index}")) for index in range(3)]
    for cpus, expected in ((2, [2]), (8, [2, 3]), (1, [2, 3])):
        monkeypatch.setattr(run, "available_cpus", lambda cpus=cpus: cpus)
        outcomes = run.check_models(checks, jobs=8)
        assert [outcome.error is not None for outcome in outcomes] == [True] * 3
        assert pools == expected
