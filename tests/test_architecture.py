"""The pipeline's layer order (pyproject.toml, [tool.importlinter]) holds."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from importlinter.cli import EXIT_STATUS_ERROR, EXIT_STATUS_SUCCESS, lint_imports

ROOT = Path(__file__).resolve().parents[1]


def _lint(config: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    # import-linter finds the package on sys.path, so run it from the checkout.
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    return lint_imports(config_filename=str(config), no_cache=True, no_logo=True)


def test_the_layers_contract_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _lint(ROOT / "pyproject.toml", monkeypatch) == EXIT_STATUS_SUCCESS


def test_the_contract_catches_an_import_against_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI imports the reporters, so a contract that puts the reporters on top is broken.
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = table["contracts"][0]
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
