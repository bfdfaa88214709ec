"""Writes docs/rules/: a page per rule and the rules' index, from gradcheck's rule catalogue,
the source `gradcheck --explain` prints from. Run it after a change to a rule:

    python docs/gen_rule_pages.py

tests/test_docs.py fails while a page differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gradcheck_cli.findings.rules import RULES
from gradcheck_cli.reporters.rule_docs import catalogue_page, rule_page

RULES_FOLDER = Path(__file__).resolve().parent / "rules"


def pages() -> dict[str, str]:
    """Each page's file name under docs/rules/, and its text."""
    return {"index.md": catalogue_page()} | {
        f"{code}.md": rule_page(rule) for code, rule in sorted(RULES.items())
    }


def main() -> int:
    RULES_FOLDER.mkdir(exist_ok=True)
    written = pages()
    for stale in set(p.name for p in RULES_FOLDER.glob("*.md")) - set(written):
        (RULES_FOLDER / stale).unlink()
    for name, text in written.items():
        (RULES_FOLDER / name).write_text(text)
    print(f"{len(written)} pages in {RULES_FOLDER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
