"""gradcheck runs with only its declared dependencies, as in pre-commit's own environment: every
module it imports is in the standard library or comes with a package that pyproject.toml asks for
(directly or through what those require)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gradcheck_cli"
# pytest imports the plugin itself, so pytest is there whenever the plugin is.
IMPORTED_BY_ITS_HOST = {("pytest_plugin.py", "pytest")}
# Imported only for a model that needs them, behind an ImportError that says what to install:
# a file Keras 2 saved (tf_keras), TF-MOT's or TF-Hub's layers in it.
FOR_THE_USERS_MODEL = {"tf_keras", "tensorflow_model_optimization", "tensorflow_hub"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def _installed_with(requirements: list[Requirement]) -> set[str]:
    """The distributions that installing `requirements` brings, by their installed metadata."""
    seen: set[str] = set()
    pending = [r for r in requirements if r.marker is None or r.marker.evaluate()]
    while pending:
        requirement = pending.pop()
        name = _normal(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.requires(requirement.name) or []:
            needed = Requirement(line)
            if needed.marker is None or needed.marker.evaluate({"extra": ""}):
                pending.append(needed)
    return seen


def _modules_of(distributions: set[str]) -> set[str]:
    return {
        module
        for module, owners in importlib.metadata.packages_distributions().items()
        if any(_normal(owner) in distributions for owner in owners)
    }


def _imports(source: Path) -> set[str]:
    """The top-level names of every module `source` imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_import_is_the_standard_library_or_a_declared_dependency() -> None:
    available = _modules_of(_installed_with(_declared())) | set(sys.stdlib_module_names)
    missing = sorted(
        f"{source.relative_to(ROOT)}: {name}"
        for source in PACKAGE.rglob("*.py")
        for name in _imports(source)
        if name not in available
        and name != "gradcheck_cli"
        and (source.name, name) not in IMPORTED_BY_ITS_HOST
        and name not in FOR_THE_USERS_MODEL
    )
    assert missing == []


def test_the_scan_sees_lazy_imports_and_the_closure_leaves_out_test_only_packages(
    tmp_path: Path,
) -> None:
    source = tmp_path / "lazy.py"
    source.write_text(
        "import os.path\n\ndef f():\n    import lazy_mod\n    from pkg.sub import x\n"
    )
    assert _imports(source) == {"os", "lazy_mod", "pkg"}
    closure = _installed_with(_declared())
    assert {"tensorflow", "keras", "numpy", "click", "cloup"} <= closure
    assert "pyyaml" not in closure and "pytest" not in closure


def test_help_runs_with_only_the_declared_dependencies_importable() -> None:
    allowed = sorted(_modules_of(_installed_with(_declared())) | {"gradcheck_cli"})
    # Any other third-party import fails, as it would in an environment with only these.
    program = (
        "import importlib.abc, sys\n"
        f"allowed = set({allowed!r}) | set(sys.stdlib_module_names)\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] not in allowed:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from gradcheck_cli.cli import main\n"
        "sys.argv = ['gradcheck', '--help']\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "--loss" in result.stdout
