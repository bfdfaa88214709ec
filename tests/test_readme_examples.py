"""The README's examples work: the pytest example passes and fails as it says, the GitHub
Actions workflow parses and calls gradcheck with options it has, the pre-commit hook is sound.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def code_block(section: str, language: str) -> str:
    """The first ```language block under the README heading `## section`."""
    text = README.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    match = re.search(rf"```{language}\n(.*?)```", body, re.DOTALL)
    assert match is not None, f"no ```{language} block under '## {section}'"
    return match.group(1)


def test_the_pytest_example_passes_on_the_fix_and_fails_on_the_seed(
    pytester: pytest.Pytester,
) -> None:
    example = code_block("Use in pytest", "python")
    assert "sample_models/faulty_weights_fixed.py" in example
    shutil.copytree(ROOT / "sample_models", pytester.path / "sample_models")
    seed = example.replace("faulty_weights_fixed.py", "faulty_weights_tf1.py")
    pytester.makepyfile(test_fixed=example, test_seed=seed)

    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")

    result.assert_outcomes(passed=1, failed=1)
    result.stdout.re_match_lines([r"FAILED test_seed\.py::"])
    output = result.stdout.str()
    assert "weights_i" in output
    assert re.search(r"sample_models/faulty_weights_tf1\.py:\d+", output)
    assert "StopGradient" in output and "Cast" in output


def _workflow() -> Any:
    return yaml.safe_load(code_block("Use in CI (GitHub Actions)", "yaml"))


def _gradcheck_command(workflow: Any) -> list[str]:
    (job,) = workflow["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    (command,) = [run for run in runs if run.startswith("gradcheck ")]
    return shlex.split(command)


def test_the_actions_workflow_runs_gradcheck_and_uploads_its_sarif() -> None:
    workflow = _workflow()
    (job,) = workflow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"
    argv = _gradcheck_command(workflow)
    output = argv[argv.index("-o") + 1]
    (upload,) = [
        step
        for step in job["steps"]
        if step.get("uses", "").startswith("github/codeql-action/upload-sarif@")
    ]
    assert upload["with"]["sarif_file"] == output
    assert upload["if"] == "always()"
    assert (ROOT / argv[1]).is_file()


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


def test_the_pre_commit_hook_runs_the_console_script_once_on_the_named_model() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gradcheck"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    assert 'gradcheck = "gradcheck_cli.cli:main"' in (ROOT / "pyproject.toml").read_text()
    assert hook["entry"] == "gradcheck"
    usage = yaml.safe_load(code_block("Use with pre-commit", "yaml"))
    (configured,) = usage["repos"][0]["hooks"]
    assert configured["id"] == hook["id"]
    assert (ROOT / configured["args"][0]).is_file()
