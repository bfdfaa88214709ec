"""The repository's GitHub Action (action.yml, a composite action) run as a runner runs it: each
`run:` step in bash with the inputs and step outputs the runner gives it, in a user's project;
the `uses:` steps (setup-python, the SARIF upload) are GitHub's own and are checked as
configured. The install step installs this checkout into a virtual environment of its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.docs_pages import ROOT
from tests.reporters.test_formats import sarif_schema  # noqa: F401  (the SARIF 2.1.0 schema)

_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def _action() -> Any:
    return yaml.safe_load((ROOT / "action.yml").read_text())


def _value(expression: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    """What the runner puts for `${{ expression }}`: an input or a step's output."""
    kind, _, rest = expression.partition(".")
    if kind == "inputs":
        return inputs[rest]
    if kind == "steps":
        step, _, output = rest.partition(".outputs.")
        return outputs.get(step, {}).get(output, "")
    raise AssertionError(f"the test does not know the expression {expression!r}")


def _run_action(project: Path, given: dict[str, str], bin_folder: Path) -> tuple[int, str]:
    """Every `run:` step of the action, in order, as the runner would; the last step's exit
    code and all the output."""
    action = _action()
    inputs = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    inputs.update(given)
    outputs: dict[str, dict[str, str]] = {}
    printed = ""
    code = 0
    for step in action["runs"]["steps"]:
        if "run" not in step:
            continue
        assert step["shell"] == "bash"
        output_file = project / f".output-{step.get('id', 'step')}"
        output_file.write_text("")
        environment = {
            **os.environ,
            "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_ACTION_PATH": str(ROOT),
            "GITHUB_OUTPUT": str(output_file),
            "RUNNER_TEMP": str(project),
            **{
                name: _EXPRESSION.sub(lambda m: _value(m.group(1), inputs, outputs), value)
                for name, value in step.get("env", {}).items()
            },
        }
        # As the runner runs a `shell: bash` step: the script in a file of its own.
        script = project / f".step-{step.get('id', 'step')}.sh"
        script.write_text(step["run"])
        ran = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=project,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )
        printed += ran.stdout + ran.stderr
        lines = output_file.read_text().splitlines()
        outputs[step.get("id", "")] = dict(line.split("=", 1) for line in lines if "=" in line)
        code = ran.returncode
        if code != 0:
            break
    return code, printed


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment that sees this interpreter's packages (TensorFlow...) and into
    which the action's install step installs gradcheck; its `bin` folder."""
    folder = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(folder)], check=True
    )
    return folder / "bin"


def test_the_action_is_a_composite_that_uploads_what_it_wrote() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    (upload,) = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload")]
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"
    assert upload["if"].startswith("always()")
    assert steps[-1]["run"].strip().startswith("exit")  # the job fails as gradcheck did


def test_the_action_s_steps_annotate_write_sarif_and_fail_on_a_dead_variable(
    saved: Path,
    tmp_path: Path,
    environment: Path,
    sarif_schema: dict[str, Any],  # noqa: F811
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    shutil.copytree(saved, project / "exported")  # `scale` is dead, as TensorFlow says
    (project / "pyproject.toml").write_text('[tool.gradcheck]\nmodels = ["exported"]\n')
    code, printed = _run_action(project, {"args": "--loss loss"}, environment)
    assert code == 1, printed  # the last step fails the job with gradcheck's exit code
    assert (environment / "gradcheck").exists()  # the install step installed this checkout
    assert re.search(r"^::error .*title=GC\d+ .*scale", printed, re.M), printed
    log = json.loads((project / "gradcheck.sarif").read_text())
    jsonschema.validate(log, sarif_schema)
    assert any(_names_scale(result) for run in log["runs"] for result in run["results"])
    # A clean run passes the job: the dead variable allowed by the arguments.
    code, printed = _run_action(
        project,
        {"args": "--loss loss --allow-dead 'scale'", "sarif-file": "clean.sarif"},
        environment,
    )
    assert code == 0, printed
    assert (project / "clean.sarif").is_file()


def _names_scale(result: dict[str, Any]) -> bool:
    return "scale" in result["message"]["text"]


def test_the_action_s_arguments_keep_each_word_whole_and_its_options_before_a_script_s() -> None:
    from gradcheck_cli.cli.action import arguments

    own = ["--format", "github", "--also", "sarif:out.sarif"]
    # The CI page's own example: the script's arguments stay the script's.
    assert arguments("run train.py -- --epochs 1", "out.sarif") == [
        "run",
        "train.py",
        *own,
        "--",
        "--epochs",
        "1",
    ]
    # A quoted argument with a line break in it is one argument, line break and all.
    assert arguments("--loss 'a\nb' m", "out.sarif") == ["--loss", "a\nb", "m", *own]
    # A `$(...)` is a word like any other: nothing runs it.
    assert arguments("'$(touch pwned)' `id`", "out.sarif") == ["$(touch pwned)", "`id`", *own]


def test_an_args_input_that_does_not_split_fails_the_step_before_gradcheck_runs(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.gradcheck]\nmodels = ["missing"]\n')
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    marker = tmp_path / "gradcheck-ran"
    # A stand-in for the installed gradcheck that records that it ran (the install step is
    # the action's own; here only what the check step does with the input is in question).
    (bin_folder / "gradcheck").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (bin_folder / "gradcheck").chmod(0o755)
    (bin_folder / "python").symlink_to(sys.executable)
    (bin_folder / "pip").write_text("#!/bin/sh\n")
    action = _action()
    (check,) = [s for s in action["runs"]["steps"] if s.get("id") == "check"]
    script = project / "check.sh"
    script.write_text(check["run"])
    output = project / "output"
    output.write_text("")
    for given in ("--loss 'unbalanced", 'run "train.py'):
        ran = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=project,
            env={
                **os.environ,
                "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}",
                "PYTHONPATH": str(ROOT),
                "GITHUB_OUTPUT": str(output),
                "RUNNER_TEMP": str(tmp_path),
                "GRADCHECK_ARGS": given,
                "GRADCHECK_SARIF": "gradcheck.sarif",
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode != 0, ran.stdout + ran.stderr
        assert ran.stdout.startswith("::error title=gradcheck action::"), ran.stdout
        assert "does not split" in ran.stdout
        assert not marker.exists()  # no bare `gradcheck` checked the config's models instead
        assert output.read_text() == ""  # no exit code for the last step to pass the job with
