"""The sections and code blocks of the README and the documentation site's pages (`docs/`), for
the tests that hold what they say to the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def page(name: str) -> Path:
    """A page: `README.md`, or a page of the site by its path under `docs/`."""
    return README if name == "README.md" else DOCS / name


def section(name: str, heading: str) -> str:
    """The text under the heading `## heading` of page `name`, up to its next `## ` heading."""
    text = page(name).read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def code_blocks(name: str, heading: str, language: str) -> list[str]:
    """Every ```language block under the heading `## heading` of page `name`, in order."""
    blocks = re.findall(rf"```{language}\n(.*?)```", section(name, heading), re.DOTALL)
    assert blocks, f"no ```{language} block under '## {heading}' in {name}"
    return blocks


def site_text() -> str:
    """Every page of the site written by hand, as one text."""
    return "\n".join(path.read_text() for path in sorted(DOCS.rglob("*.md")))
