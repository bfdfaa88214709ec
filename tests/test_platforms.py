"""What gradcheck runs on, said once in the package metadata and held to: the documentation's
statement, the interpreter the suite runs on, the refusal on a system without fork, and the
project page the SARIF report names."""

from __future__ import annotations

import sys
import tomllib

import pytest
from packaging.specifiers import SpecifierSet

from gradcheck_cli import cli
from gradcheck_cli.reporters.sarif import INFORMATION_URI
from tests.docs_pages import ROOT, section

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_metadata_names_the_platforms_and_pythons_the_readme_states() -> None:
    classifiers = PROJECT["classifiers"]
    systems = {c.split(" :: ", 1)[1] for c in classifiers if c.startswith("Operating System")}
    assert systems == {"POSIX :: Linux", "MacOS"}
    python = "Programming Language :: Python :: "
    pythons = [c.removeprefix(python) for c in classifiers if c.startswith(python)]
    pythons = [version for version in pythons if "." in version]  # `3` alone names no release
    supported = SpecifierSet(PROJECT["requires-python"])
    assert pythons and all(version in supported for version in pythons)
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in pythons  # this suite's
    statement = section("libraries.md", "Supported platforms")
    assert "Linux and macOS" in statement and "Windows" in statement
    assert f"Python {pythons[0]}" in statement and all(v in statement for v in pythons)


def test_a_system_without_fork_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli.os, "name", "nt")
    monkeypatch.setattr(sys, "argv", ["gradcheck", "model.py"])
    with pytest.raises(SystemExit) as stopped:
        cli.main()
    assert stopped.value.code == cli.ExitCode.ERROR
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gradcheck: error: gradcheck runs on Linux and macOS") and "WSL" in line


def test_sarif_names_the_project_page_of_the_metadata() -> None:
    assert INFORMATION_URI == PROJECT["urls"]["Homepage"]
