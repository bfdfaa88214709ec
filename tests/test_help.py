"""`--help` of both commands as a new user reads it, and the usage errors that say what to
type instead: `gradcheck run` shown at the top, each option worded for its own command, a
script's own arguments sent after `--`."""

from __future__ import annotations

import re

import pytest

from gradcheck_cli.cli import command, run_command
from gradcheck_cli.run import ExitCode
from tests.cli_runs import invoke


def _help(run: bool = False) -> str:
    """`gradcheck --help`, or `gradcheck run --help`, as `main` starts them."""
    cmd, name = (run_command, "gradcheck run") if run else (command, "gradcheck")
    code, out, err = invoke(cmd, ["--help"], prog_name=name, env={"COLUMNS": "100"})
    assert (code, err) == (ExitCode.CLEAN, "")
    return out


def _option_help(text: str, option: str) -> str:
    """The help of `option` in a --help text, its lines joined."""
    match = re.search(rf"^  (?:-\w, )?{option} .*?(?=^  -|^\S|\Z)", text, re.M | re.S)
    assert match is not None, option
    return " ".join(match.group().split())


def test_top_help_shows_the_plain_form_and_the_run_form() -> None:
    text = _help()
    usage = text.split("\n\n")[0].splitlines()
    assert usage == [
        "Usage: gradcheck [OPTIONS] [MODEL]...",
        "       gradcheck run [OPTIONS] SCRIPT [-- SCRIPT ARGS...]",
    ]
    commands = text.split("Commands:\n", 1)[1].split("\n\n")[0]
    assert commands.lstrip().startswith("run SCRIPT [-- SCRIPT ARGS...]")
    assert "Run a training script unchanged" in commands
    assert "gradcheck run --help lists its options" in " ".join(commands.split())


def test_run_help_words_timeout_and_memory_for_the_script() -> None:
    text = _help(run=True)
    timeout = _option_help(text, "--timeout")
    assert timeout.startswith(
        "--timeout SECONDS Seconds the script may run until its first gradient request "
        "(TensorFlow's import included)"
    )
    memory = _option_help(text, "--memory-limit")
    assert memory.startswith("--memory-limit SIZE Memory the script's process")
    # Nothing in `run --help` speaks of models or Keras files: a script is what it runs.
    options = text.split("Input:", 1)[1]
    assert not re.search(r"model|keras", options, re.I), options


def test_model_help_words_timeout_for_loading_a_model() -> None:
    text = _help()
    assert _option_help(text, "--timeout").startswith(
        "--timeout SECONDS Seconds a script or Keras file may take to load and trace its loss"
    )
    assert "gradient request" not in _option_help(text, "--timeout")


@pytest.mark.parametrize(
    ("args", "instead"),
    [
        (["train.py", "--epochs", "1"], "gradcheck run train.py -- --epochs 1"),
        (["train.py", "--epochs=1"], "gradcheck run train.py -- --epochs=1"),
        (
            ["-q", "train.py", "data.csv", "--epochs", "1", "--timeout", "30"],
            "gradcheck run train.py -q --timeout 30 -- data.csv --epochs 1",
        ),
        (["train.py", "-v", "--lr", "a b"], "gradcheck run train.py -v -- --lr 'a b'"),
    ],
)
def test_an_unknown_option_after_the_script_goes_after_the_double_dash(
    args: list[str], instead: str
) -> None:
    code, out, err = invoke(run_command, args, prog_name="gradcheck run")
    assert (code, out) == (ExitCode.ERROR, "")
    option = next(a for a in args if a.startswith("--") and a.split("=")[0] not in {"--timeout"})
    assert err == (
        f"gradcheck: error: gradcheck run has no option {option.split('=')[0]}; the script's own "
        f"arguments go after --: {instead}\n"
    )


def test_an_unknown_option_before_the_script_is_click_s_one_line() -> None:
    code, out, err = invoke(run_command, ["--epochs", "1", "train.py"], prog_name="gradcheck run")
    assert (code, out) == (ExitCode.ERROR, "")
    (line,) = err.splitlines()
    assert line == (
        "gradcheck: error: No such option '--epochs'. (gradcheck run --help lists the options)"
    )


def test_a_mistyped_option_of_gradcheck_s_own_keeps_click_s_guess() -> None:
    code, out, err = invoke(run_command, ["train.py", "--verfy"], prog_name="gradcheck run")
    assert (code, out) == (ExitCode.ERROR, "")
    (line,) = err.splitlines()
    assert line.startswith("gradcheck: error: No such option '--verfy'. (Did you mean ")
    assert "'--verify'" in line and " -- " not in line


def test_a_script_s_option_in_a_plain_check_names_gradcheck_run() -> None:
    code, out, err = invoke(command, ["train.py", "--epochs", "1"], prog_name="gradcheck")
    assert (code, out) == (ExitCode.ERROR, "")
    assert err == (
        "gradcheck: error: No such option '--epochs'. If it is train.py's own, a plain check "
        "cannot pass it (it imports the script without arguments); check the script as it "
        "trains, with its arguments: gradcheck run train.py -- --epochs 1 "
        "(gradcheck --help lists the options)\n"
    )


def test_an_option_of_gradcheck_run_in_a_plain_check_says_so() -> None:
    code, out, err = invoke(command, ["train.py", "--continue"], prog_name="gradcheck")
    assert (code, out) == (ExitCode.ERROR, "")
    assert err == (
        "gradcheck: error: gradcheck has no option --continue: it is an option of "
        "`gradcheck run` (gradcheck run --help lists its options)\n"
    )


def test_an_option_of_the_plain_form_in_gradcheck_run_says_so() -> None:
    code, out, err = invoke(run_command, ["train.py", "--loss", "loss"], prog_name="gradcheck run")
    assert (code, out) == (ExitCode.ERROR, "")
    assert err == (
        "gradcheck: error: gradcheck run has no option --loss: it is an option of `gradcheck "
        "MODEL...`, which checks a model without running it as a training script; if it is "
        "the script's own, it goes after --: gradcheck run train.py -- --loss loss\n"
    )
