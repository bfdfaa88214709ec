"""How the suite itself runs: CI runs the README's test command, the heavy tier names tests that
exist, behind a registered marker, and pytest-xdist keeps what is shared on one worker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import HEAVY, SHARING_CHECKS, _group_by_module

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("entry", HEAVY)
def test_every_heavy_entry_names_a_test_module_or_a_test(entry: str) -> None:
    path, _, test = entry.partition("::")
    module = ROOT / path
    assert module.is_file(), f"{path} does not exist"
    if test:
        assert re.search(rf"^def {re.escape(test)}\(", module.read_text(), re.M), entry


def test_the_marker_is_registered_for_the_readme_s_fast_loop(pytestconfig: pytest.Config) -> None:
    markers = pytestconfig.getini("markers")
    assert any(marker.startswith("heavy: ") for marker in markers)


def test_ci_runs_the_readme_s_test_command() -> None:
    readme_command = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].splitlines()[1]
    assert readme_command.startswith(
        "bash tests/install-chromium.sh && python -m pip install -e '.[test]' && python -m pytest"
    )
    ci_commands = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci_commands[-1] == readme_command
    assert " -m " not in readme_command.split("pytest", 1)[1]  # every test, heavy ones too


def test_a_module_is_one_xdist_group_and_the_modules_sharing_checks_are_one(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_shares="def test_one(repository_checks): pass\ndef test_two(): pass\n",
        test_alone="def test_three(): pass\ndef test_four(): pass\n",
    )
    items = pytester.getitems(pytester.path)
    _group_by_module(items)
    groups = {item.name: item.get_closest_marker("xdist_group").args[0] for item in items}
    assert groups == {
        "test_one": SHARING_CHECKS,
        "test_two": SHARING_CHECKS,
        "test_three": "test_alone.py",
        "test_four": "test_alone.py",
    }
