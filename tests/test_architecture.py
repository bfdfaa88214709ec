"""The pipeline's layer order and the TensorFlow door (pyproject.toml, [tool.importlinter]) hold,
and the package's folders stay small enough to read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from importlinter.cli import EXIT_STATUS_ERROR, EXIT_STATUS_SUCCESS, lint_imports

from tests.docs_pages import section

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gradcheck_cli"
# The packages whose code runs in the worker (or in the user's process) with TensorFlow.
TENSORFLOW_PACKAGES = {"jobs", "run_mode", "tracing"}
MAX_MODULES_PER_FOLDER = 15
MAX_LINES_PER_MODULE = 500
RULE_CATALOGUE = PACKAGE / "findings" / "rules.py"


def _table() -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "importlinter"
    ]
    return table


def _contract(contract_id: str) -> dict[str, Any]:
    (contract,) = (c for c in _table()["contracts"] if c["id"] == contract_id)
    return contract


def _lint(config: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    # import-linter finds the package on sys.path, so run it from the checkout.
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    return lint_imports(config_filename=str(config), no_cache=True, no_logo=True)


def _top_level_names() -> set[str]:
    """gradcheck_cli's own modules and packages, by name (its __init__ aside)."""
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.name != "__init__.py"}
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    return modules | packages


def test_every_contract_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _lint(ROOT / "pyproject.toml", monkeypatch) == EXIT_STATUS_SUCCESS


def test_the_contract_catches_an_import_against_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI imports the reporters, so a contract that puts the reporters on top is broken.
    table = _table()
    contract = _contract("pipeline")
    upside_down = "\n".join(
        [
            "[importlinter]",
            f"root_package = {table['root_package']}",
            "[importlinter:contract:upside-down]",
            "name = upside down",
            "type = layers",
            f"containers = {contract['containers'][0]}",
            "layers =",
            "    reporters",
            "    cli",
        ]
    )
    config = tmp_path / "setup.cfg"
    config.write_text(upside_down + "\n")
    assert _lint(config, monkeypatch) == EXIT_STATUS_ERROR


def _lint_copy(tree: Path, contract_id: str) -> subprocess.CompletedProcess[str]:
    # In a process of its own, from the copy: this process has imported the checkout's
    # gradcheck_cli, and import-linter would find that one.
    code = (
        "import sys\n"
        "from importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename='pyproject.toml', "
        f"limit_to_contracts=({contract_id!r},), no_cache=True, no_logo=True))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("copy")
    shutil.copytree(PACKAGE, tree / "gradcheck_cli", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


@pytest.mark.parametrize("statement", ["import tensorflow as tf", "from keras import layers"])
def test_the_tensorflow_door_catches_an_import_added_to_the_analysis(
    package_copy: Path, statement: str
) -> None:
    clean = _lint_copy(package_copy, "tensorflow-door")
    assert clean.returncode == EXIT_STATUS_SUCCESS, clean.stdout + clean.stderr
    leak = package_copy / "gradcheck_cli" / "analysis" / "leak.py"
    leak.write_text(f'"""A module that breaks the door."""\n\n{statement}\n')
    try:
        broken = _lint_copy(package_copy, "tensorflow-door")
    finally:
        leak.unlink()
    assert broken.returncode == EXIT_STATUS_ERROR, broken.stdout + broken.stderr
    imported = statement.split()[1].split(".")[0]
    assert f"gradcheck_cli.analysis.leak -> {imported}" in broken.stdout, broken.stdout


def test_every_module_is_on_one_side_of_the_tensorflow_door() -> None:
    # A new package must be placed: in the worker's packages, or under the door's contract.
    door = _contract("tensorflow-door")
    behind = {name.removeprefix("gradcheck_cli.") for name in door["source_modules"]}
    assert behind.isdisjoint(TENSORFLOW_PACKAGES)
    assert behind | TENSORFLOW_PACKAGES == _top_level_names()


def test_every_package_has_its_place_in_the_layers() -> None:
    layered = {
        name.strip() for layer in _contract("pipeline")["layers"] for name in layer.split("|")
    }
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages <= layered, packages - layered
    forbidden = _contract("analysis-sees-the-graph-model")["forbidden_modules"]
    loaders = {name.removeprefix("gradcheck_cli.") for name in forbidden}
    # The analysis is told apart from every package between it and the graph model.
    layers = [layer.strip() for layer in _contract("pipeline")["layers"]]
    below_analysis = layers[layers.index("analysis") + 1 : layers.index("differentiability")]
    assert loaders == {name.strip() for layer in below_analysis for name in layer.split("|")}


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in [PACKAGE, *(path.parent for path in PACKAGE.rglob("__init__.py"))]
        if (count := len(list(folder.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert not crowded


def test_no_module_but_the_rule_catalogue_is_over_five_hundred_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in PACKAGE.rglob("*.py")
        if path != RULE_CATALOGUE
        and (lines := len(path.read_text().splitlines())) > MAX_LINES_PER_MODULE
    }
    assert not long


def test_the_architecture_page_maps_every_package_and_every_loader_module() -> None:
    architecture = section("contributing/architecture.md", "The layers")
    # The layer table: one row per layer, its packages first.
    rows = {line.split()[0] for line in architecture.splitlines() if line.startswith("    ")}
    layers = {layer.strip().split()[0] for layer in _contract("pipeline")["layers"]}
    assert layers <= rows, layers - rows
    forbidden = _contract("analysis-sees-the-graph-model")["forbidden_modules"]
    for package in (name.removeprefix("gradcheck_cli.") for name in forbidden):
        (entry,) = re.findall(rf"^- `{package}/`:(.*?)(?=^- |^$)", architecture, re.M | re.S)
        modules = {path.stem for path in (PACKAGE / package).glob("*.py")} - {"__init__"}
        unnamed = {module for module in modules if f"`{module}`" not in entry}
        assert not unnamed, (package, unnamed)
