"""The rules' documentation as Markdown: one page per rule and the catalogue, for the
documentation site (`docs/rules/`, generated at build time) and SARIF's rule help."""

from __future__ import annotations

from gradcheck_cli.findings.rules import RULES, Rule

GROUPS = {
    "0": "0xx: could not load, model or verify",
    "1": "1xx: dead trainable variables",
    "2": "2xx: suspicious, but nothing is dead because of it",
}


def rule_sections_markdown(rule: Rule, *, level: int) -> str:
    """The rule's four sections (What it does, Why is this bad?, Example, Use instead), each
    under a heading of `level`."""
    parts = []
    for heading, body, language in rule.sections:
        if language is not None:
            body = f"```{language}\n{body}\n```"
        parts.append(f"{'#' * level} {heading}\n\n{body}")
    return "\n\n".join(parts)


def rule_page(rule: Rule) -> str:
    """One rule's page, as ruff's rule pages read: name and code, severity and summary, the
    four sections, and where the same text is in the terminal."""
    return (
        f"# {rule.name} ({rule.code})\n\n"
        f"**{rule.severity.value.capitalize()}.** {rule.summary}\n\n"
        f"{rule_sections_markdown(rule, level=2)}\n\n"
        f"In a terminal: `gradcheck --explain {rule.code}`. "
        f"[Every rule](index.md)\n"
    )


def catalogue_page() -> str:
    """Every rule by its group of codes: a table of code (linked to its page), name, severity
    and summary."""
    parts = [
        "# Rules\n",
        "Every finding has a stable code: codes are never renumbered or reused. "
        "`gradcheck --explain CODE` (or its name) prints a rule's page in the terminal, "
        "`gradcheck --explain all` this list.",
    ]
    rules = [RULES[code] for code in sorted(RULES)]
    for group in sorted({rule.code[2] for rule in rules}):
        parts.append(f"## {GROUPS.get(group, group + 'xx')}")
        rows = ["| Code | Name | Severity | What it finds |", "| --- | --- | --- | --- |"]
        for rule in rules:
            if rule.code[2] == group:
                summary = rule.summary.replace("|", "\\|")
                rows.append(
                    f"| [{rule.code}]({rule.code}.md) | `{rule.name}` "
                    f"| {rule.severity.value} | {summary} |"
                )
        parts.append("\n".join(rows))
    return "\n\n".join(parts) + "\n"
