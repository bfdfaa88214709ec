"""`gradcheck --explain`: one rule's documentation, or the catalogue of every rule."""

from __future__ import annotations

import io

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from gradcheck_cli.findings.finding import Severity
from gradcheck_cli.findings.rules import RULES, Rule, rule_for_code

_SEVERITY_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_GROUPS = {
    "0": "0xx  could not load, model or verify",
    "1": "1xx  dead trainable variables",
    "2": "2xx  suspicious, but nothing is dead because of it",
}
_INDENT = 4
# The width that stands for "never wrap" (width None: a pipe or a file): wider than any paragraph;
# the padding rich adds up to it is stripped from every line.
_UNWRAPPED = 10_000


def render_explanation(code: str, *, color: bool = False, width: int | None = 100) -> str:
    """The rule `code` (its code or its name, any case), or the catalogue for `all`;
    GradcheckError if unknown.

    `width` None: no line is wrapped (output to a pipe or a file)."""
    if code.strip().lower() == "all":
        return render_catalogue(color=color, width=width)
    return render_rule(rule_for_code(code), color=color, width=width)


def render_rule(rule: Rule, *, color: bool, width: int | None) -> str:
    """One rule as a small document: title, summary, then the four sections."""
    title = Text.assemble(
        (rule.code, "bold"),
        " ",
        (rule.name, "bold"),
        " (",
        (rule.severity.value, _SEVERITY_STYLE[rule.severity]),
        ")",
    )
    parts: list[RenderableType] = [title, Text(rule.summary)]
    for heading, body, language in rule.sections:
        shown = _prose(body) if language is None else _code(body, language)
        parts += [Text(), Text(heading, style="bold underline"), shown]
    return _render(Group(*parts), color=color, width=width)


def render_catalogue(*, color: bool = False, width: int | None = 100) -> str:
    """Every rule, grouped by hundreds: code, name, severity and summary."""
    rules = [RULES[code] for code in sorted(RULES)]
    name_width = max(len(rule.name) for rule in rules)
    parts: list[RenderableType] = []
    for group in sorted({rule.code[2] for rule in rules}):
        if parts:
            parts.append(Text())
        parts.append(Text(_GROUPS.get(group, f"{group}xx"), style="bold"))
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
        # The same column widths in every group, so the groups line up.
        table.add_column("code", no_wrap=True, min_width=5)
        table.add_column("name", no_wrap=True, min_width=name_width)
        table.add_column("severity", no_wrap=True, min_width=len("warning"))
        table.add_column("summary", overflow="fold")
        for rule in rules:
            if rule.code[2] == group:
                table.add_row(
                    Text(rule.code, style="bold"),
                    rule.name,
                    Text(rule.severity.value, style=_SEVERITY_STYLE[rule.severity]),
                    rule.summary,
                )
        parts.append(Padding(table, (0, 0, 0, 2)))
    parts += [Text(), Text("gradcheck --explain CODE (or NAME) shows one rule's documentation.")]
    return _render(Group(*parts), color=color, width=width)


def _prose(text: str) -> RenderableType:
    parts: list[RenderableType] = []
    for paragraph in text.split("\n\n"):
        rendered = Text(" ".join(paragraph.split()))
        rendered.highlight_regex(r"`[^`]+`", "cyan")
        if parts:
            parts.append(Text())
        parts.append(Padding(rendered, (0, 0, 0, 2)))
    return Group(*parts)


def _code(snippet: str, lexer: str) -> RenderableType:
    # "ansi_dark" uses the terminal's own palette and background, so it reads on any theme,
    # and with colour off rich drops the styles and leaves plain, indented text.
    syntax = Syntax(snippet, lexer, theme="ansi_dark", background_color="default", word_wrap=True)
    return Padding(syntax, (0, 0, 0, _INDENT))


def _render(renderable: RenderableType, *, color: bool, width: int | None) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or _UNWRAPPED,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
    )
    console.print(renderable)
    # Padding fills each line to the console width; trailing blanks are noise in a terminal
    # and in a file.
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
