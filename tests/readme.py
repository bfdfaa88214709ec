"""The README's sections and code blocks, for the tests that hold the README to the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def section(heading: str) -> str:
    """The text under the README heading `## heading`, up to the next `## ` heading."""
    text = README.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def code_blocks(heading: str, language: str) -> list[str]:
    """Every ```language block under the README heading `## heading`, in order."""
    blocks = re.findall(rf"```{language}\n(.*?)```", section(heading), re.DOTALL)
    assert blocks, f"no ```{language} block under '## {heading}'"
    return blocks
