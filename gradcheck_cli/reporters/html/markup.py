"""HTML text for the page: every string escaped, rule codes linked, source lines anchored."""

from __future__ import annotations

import html
import re

from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.rules import RULES
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters.sarif import INFORMATION_URI

RULE_PAGES = f"{INFORMATION_URI}/blob/main/docs/rules"
"""Where each rule's page lives in the repository: `RULE_PAGES/GC101.md`."""


def esc(text: object) -> str:
    """`text` as HTML text or an attribute's value: `&`, `<`, `>` and both quotes escaped."""
    return html.escape(str(text), quote=True)


def rule_link(code: str) -> str:
    """The rule's code linked to its documentation page, its summary as the link's title."""
    rule = RULES.get(code)
    title = f' title="{esc(rule.summary)}"' if rule is not None else ""
    return f'<a class="rule" href="{esc(f"{RULE_PAGES}/{code}.md")}"{title}>{esc(code)}</a>'


def where(location: SourceLocation) -> str:
    return f"{display_path(location.file)}:{location.line}"


def _id_text(text: str) -> str:
    """`text` fit for an `id` and a link to it: every character but letters, digits, `.`, `_`
    and `-` as `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def source_id(location: SourceLocation) -> str:
    """The `id` of a quoted source line on the page: `src-FILE-LINE`, the file's path as
    shown with every character but letters, digits, `.`, `_` and `-` as `_`."""
    return f"src-{_id_text(display_path(location.file))}-{location.line}"


def variable_id(name: str, taken: set[str]) -> str:
    """The `id` of a variable's story: `var-NAME`, the name as `source_id` writes a path, then
    `-2`, `-3` ... when another story on the page has it already (two names the same but for
    their punctuation, one variable in two reports); added to `taken`."""
    base = f"var-{_id_text(name)}"
    anchor, number = base, 1
    while anchor in taken:
        number += 1
        anchor = f"{base}-{number}"
    taken.add(anchor)
    return anchor


def where_link(location: SourceLocation, text: str | None = None) -> str:
    """`file:line` (or `text`) linked to the line in the page's source section."""
    shown = where(location) if text is None else text
    return f'<a class="where" href="#{esc(source_id(location))}">{esc(shown)}</a>'


def code_line(report_code: str | None) -> str:
    return "" if report_code is None else f'<pre class="code">{esc(report_code)}</pre>'
