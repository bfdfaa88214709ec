"""The documentation: the site builds with warnings as errors (broken links and anchors too),
every rule of `gradcheck --explain all` has its page, generated from the rule catalogue, and the
README stays a page whose links lead to pages that exist."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from gradcheck_cli.cli import command
from tests.cli_runs import cli_result
from tests.docs_pages import DOCS, README, ROOT

README_LINES = 200


def _generated_pages() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("gen_rule_pages", DOCS / "gen_rule_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pages()


def test_the_site_builds_with_warnings_as_errors_and_has_a_page_per_rule(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    catalogue = cli_result(command, ["--explain", "all"])
    assert catalogue.exit_code == 0
    codes = re.findall(r"^\s+(GC\d{3})\s", catalogue.stdout, re.M)
    assert len(codes) > 30 and "GC101" in codes
    missing = [code for code in codes if not (site / "rules" / code / "index.html").is_file()]
    assert missing == []
    # Each rule's page holds its own documentation, as --explain prints it.
    page = (site / "rules" / "GC102" / "index.html").read_text()
    explained = cli_result(command, ["--explain", "GC102"]).stdout
    assert "integer-cast-cuts-variable" in explained
    assert "integer-cast-cuts-variable" in page and "Use instead" in page
    for code in codes:
        assert f'href="{code}/"' in (site / "rules" / "index.html").read_text()


def test_the_rule_pages_are_the_catalogue_s(tmp_path: Path) -> None:
    written = {path.name: path.read_text() for path in (DOCS / "rules").glob("*.md")}
    # `python docs/gen_rule_pages.py` rewrites them after a change to a rule.
    assert written == _generated_pages()


def test_the_readme_is_a_page_whose_links_lead_somewhere() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"\w+://", link)]
    assert "docs/getting-started.md" in local
    assert [link for link in local if not (ROOT / link).exists()] == []
    # Every page of the site is in the navigation, or is a rule page the rules' index links.
    navigation = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")]
    unlisted = [p for p in pages if p not in navigation and not p.startswith("rules/")]
    assert unlisted == []
