"""The CI page's examples work (docs/ci.md): the GitHub Actions workflow uses the repository's
action with inputs it has (the README's step is the page's), and the command the action runs has
options gradcheck has; the pre-commit hook is sound. (The pytest example runs with the plugin's
own fixture tests, in one pytest subprocess: tests/test_pytest_plugin.py.)
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from gradcheck_cli.cli.action import arguments as action_arguments
from tests.cli_runs import cli_result
from tests.docs_pages import ROOT, code_blocks

pytest_plugins = ["pytester"]


def code_block(heading: str, language: str) -> str:
    """The first ```language block under the heading `## heading` of the CI page."""
    return code_blocks("ci.md", heading, language)[0]


def _workflow() -> Any:
    return yaml.safe_load(code_block("Use in CI (GitHub Actions)", "yaml"))


def _action_step(workflow: Any) -> dict[str, Any]:
    (job,) = workflow["jobs"].values()
    (step,) = [
        step for step in job["steps"] if step.get("uses", "").endswith("/gradcheck@COMMIT_SHA")
    ]
    return step


def _gradcheck_command(workflow: Any) -> list[str]:
    """The command the action runs for the workflow's `args` (action.yml's check step)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    (check,) = [step for step in action["runs"]["steps"] if step.get("id") == "check"]
    assert "python -m gradcheck_cli.cli.action" in check["run"]
    assert 'gradcheck "${arguments[@]}"' in check["run"]
    sarif = action["inputs"]["sarif-file"]["default"]
    args = _action_step(workflow)["with"]["args"]
    return ["gradcheck", *action_arguments(args, sarif)]


def test_the_actions_workflow_uses_the_repository_s_action_pinned_to_a_commit() -> None:
    workflow = _workflow()
    (job,) = workflow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"  # the action uploads SARIF
    step = _action_step(workflow)
    owner, _, pinned = step["uses"].partition("@")
    assert owner.endswith("/gradcheck") and pinned == "COMMIT_SHA"
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert set(step["with"]) <= set(action["inputs"])  # only inputs the action has


def test_the_readme_s_step_is_the_ci_page_s() -> None:
    (block,) = code_blocks("README.md", "In CI", "yaml")
    (step,) = yaml.safe_load(textwrap.dedent(block))
    assert step == _action_step(_workflow())


def test_the_plain_commands_install_gradcheck_pinned_from_its_git_repository() -> None:
    # gradcheck is not on PyPI, and `pip install -e .` only works in gradcheck's own checkout.
    (block,) = [b for b in code_blocks("ci.md", "Use in CI (GitHub Actions)", "bash")]
    install = shlex.split(block.splitlines()[0])
    assert "-e" not in install
    (line,) = [token for token in install if token.startswith("gradcheck @")]
    requirement = Requirement(line)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert requirement.name == project["name"]
    assert requirement.url is not None
    url, _, pinned = requirement.url.rpartition("@")
    assert url.startswith("git+https://") and url.endswith("/gradcheck") and pinned


@pytest.fixture(scope="module")
def project_with_models(saved: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose pyproject.toml lists one SavedModel with a dead variable as `models`:
    test_cli's SavedModel, whose dead `scale` TensorFlow itself confirmed."""
    project = tmp_path_factory.mktemp("project")
    shutil.copytree(saved, project / "exported")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "user-project"\n\n[tool.gradcheck]\nmodels = ["exported"]\n'
        'loss = "loss"\n'
    )
    return project


@pytest.mark.heavy  # imports TensorFlow to write the SavedModel
def test_the_workflow_command_checks_the_models_of_the_users_pyproject(
    project_with_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gradcheck_cli.cli import ExitCode, command

    argv = _gradcheck_command(_workflow())
    argv = [token for token in argv if token not in ("models/export", "--loss", "loss")]
    monkeypatch.chdir(project_with_models)
    result = cli_result(command, argv[1:])
    assert result.exit_code == ExitCode.DEAD_VARIABLES, result.stderr
    assert "::error" in result.stdout and "scale" in result.stdout  # the annotations
    sarif_file = argv[argv.index("--also") + 1].removeprefix("sarif:")
    sarif = json.loads((project_with_models / sarif_file).read_text())
    (run,) = sarif["runs"]
    assert any("scale" in result["message"]["text"] for result in run["results"])
    assert run["properties"]["model"] == "exported"  # the configured model, as typed


def test_the_actions_workflow_uses_only_options_gradcheck_has() -> None:
    argv = _gradcheck_command(_workflow())
    help_text = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for option in [token for token in argv if token.startswith("-")]:
        assert re.search(rf"(^|[\s,/]){re.escape(option)}\b", help_text, re.MULTILINE), (
            f"gradcheck --help has no {option}"
        )
    choices = re.search(r"--format \[([^\]]+)\]", help_text)
    assert choices is not None
    assert argv[argv.index("--format") + 1] in choices.group(1).split("|")


def _pre_commit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], capture_output=True, text=True, timeout=120
    )


def test_the_hook_and_the_readme_configurations_are_valid_for_pre_commit(tmp_path: Path) -> None:
    manifest = _pre_commit("validate-manifest", str(ROOT / ".pre-commit-hooks.yaml"))
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    blocks = code_blocks("ci.md", "Use with pre-commit", "yaml")
    assert len(blocks) == 2
    for index, block in enumerate(blocks):
        path = tmp_path / f"config{index}.yaml"
        path.write_text(block)
        result = _pre_commit("validate-config", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
    # The validator does refuse a broken configuration: a remote repository without `rev`.
    broken = tmp_path / "broken.yaml"
    broken.write_text(re.sub(r"\n\s*rev:.*", "", blocks[0]))
    assert _pre_commit("validate-config", str(broken)).returncode != 0


def test_the_pre_commit_hook_runs_a_bare_gradcheck_once_on_the_configured_models() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gradcheck"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    assert 'gradcheck = "gradcheck_cli.cli:main"' in (ROOT / "pyproject.toml").read_text()
    assert hook["entry"] == "gradcheck"
    assert "args" not in hook  # a bare run: the `models` of [tool.gradcheck]
    remote, local = (
        yaml.safe_load(block) for block in code_blocks("ci.md", "Use with pre-commit", "yaml")
    )
    (repository,) = remote["repos"]
    (configured,) = repository["hooks"]
    assert configured["id"] == hook["id"]
    assert "args" not in configured
    # A version tag as `rev` must exist (v0.1.0 did not); anything else is a commit to pin.
    rev = str(repository["rev"])
    tags = subprocess.run(
        ["git", "tag", "--list", rev], capture_output=True, text=True, cwd=ROOT
    ).stdout.split()
    assert not re.fullmatch(r"v?\d+(\.\d+)+", rev) or rev in tags
    (local_repository,) = local["repos"]
    (local_hook,) = local_repository["hooks"]
    assert local_repository["repo"] == "local" and local_hook["language"] == "system"
    assert local_hook["entry"] == hook["entry"] and local_hook["pass_filenames"] is False
