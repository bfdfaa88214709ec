"""SARIF 2.1.0 for code scanning: one run per model, every rule documented, stable fingerprints."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import RULES, Rule
from gradcheck_cli.findings.source import notebook_cell
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import display_path

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
# No project home page yet: the package index entry stands in for it.
INFORMATION_URI = "https://pypi.org/project/gradcheck/"
SRCROOT = "%SRCROOT%"
FINGERPRINT = "gradcheck/v1"

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_GROUP_TAGS = {
    "0": ("gradcheck", "could-not-model"),
    "1": ("gradcheck", "dead-variable", "correctness"),
    "2": ("gradcheck", "suspicious"),
}
_RULE_INDEX = {code: index for index, code in enumerate(RULES)}


def render_sarif(reports: Sequence[Report]) -> str:
    """A SARIF log with one run per report; a report without findings is a run without results."""
    log = {
        "$schema": SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [_run(report, categorised=len(reports) > 1) for report in reports],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _run(report: Report, *, categorised: bool) -> dict[str, Any]:
    run: dict[str, Any] = {
        "tool": {"driver": _driver()},
        "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().as_uri().rstrip("/") + "/"}},
        "results": [_result(report, item) for item in report.findings],
        "properties": {
            "model": display_path(report.source.path),
            "kind": report.source.kind,
            "loss": report.source.loss,
            "summary": report.summary,
        },
    }
    if categorised:
        # Code scanning keeps one analysis per category: each model's run gets its own.
        run["automationDetails"] = {"id": f"gradcheck/{display_path(report.source.path)}/"}
    return run


def _driver() -> dict[str, Any]:
    from gradcheck_cli.version import __version__

    return {
        "name": "gradcheck",
        "informationUri": INFORMATION_URI,
        "semanticVersion": __version__,
        "version": __version__,
        "rules": [rule_descriptor(rule) for rule in RULES.values()],
    }


def rule_descriptor(rule: Rule) -> dict[str, Any]:
    """A SARIF reportingDescriptor from the rule's own documentation."""
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.what_it_does},
        "help": {"text": _help_text(rule), "markdown": _help_markdown(rule)},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": list(_GROUP_TAGS.get(rule.code[2], ("gradcheck",)))},
    }


def _help_text(rule: Rule) -> str:
    parts = [f"{rule.code} {rule.name}: {rule.summary}"]
    for heading, body, language in rule.sections:
        if language is not None:
            body = "\n".join("    " + line for line in body.splitlines())
        parts.append(f"{heading}\n\n{body}")
    return "\n\n".join(parts)


def _help_markdown(rule: Rule) -> str:
    parts = [f"**{rule.code} {rule.name}**: {rule.summary}"]
    for heading, body, language in rule.sections:
        if language is not None:
            body = f"```{language}\n{body}\n```"
        parts.append(f"### {heading}\n\n{body}")
    return "\n\n".join(parts)


def _result(report: Report, item: Finding) -> dict[str, Any]:
    text = item.message if item.hint is None else f"{item.message}\nfix: {item.hint}"
    result: dict[str, Any] = {
        "ruleId": item.code,
        "level": _LEVEL[item.severity],
        "message": {"text": text},
        "locations": [_location(report, item)],
        "partialFingerprints": {FINGERPRINT: fingerprint(item)},
    }
    if item.code in _RULE_INDEX:
        result["ruleIndex"] = _RULE_INDEX[item.code]
    return result


def _location(report: Report, item: Finding) -> dict[str, Any]:
    location: dict[str, Any] = {"logicalLocations": _logical_locations(report, item)}
    if item.location is not None and item.location.line >= 1:
        location["physicalLocation"] = {
            "artifactLocation": artifact_location(item.location),
            "region": {"startLine": item.location.line},
        }
        cell = notebook_cell(item.location.file)
        if cell is not None:
            # SARIF knows no notebook cells, and a cell's line is no line of the .ipynb file:
            # point at the notebook's first line, and name the cell and its line.
            location["physicalLocation"]["region"] = {"startLine": 1}
            location["physicalLocation"]["properties"] = {
                "notebookCell": cell[1],
                "cellLine": item.location.line,
            }
            where = f"{display_path(item.location.file)}:{item.location.line}"
            location["message"] = {"text": where}
    return location


def _logical_locations(report: Report, item: Finding) -> list[dict[str, str]]:
    model = display_path(report.source.path)
    found = [
        {"name": name, "fullyQualifiedName": f"{model}::{name}", "kind": kind}
        for name, kind in ((item.variable, "variable"), (item.op, "member"))
        if name is not None
    ]
    # Always somewhere to point at: the model itself when no variable or op is named.
    return found or [{"name": model, "fullyQualifiedName": model, "kind": "module"}]


def artifact_location(location: SourceLocation) -> dict[str, str]:
    """The file (for a cell, its notebook) relative to %SRCROOT% when inside it, else a file URI."""
    cell = notebook_cell(location.file)
    path = os.path.abspath(location.file if cell is None else cell[0])
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        relative = ".."
    if relative.startswith(".."):
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(PurePath(relative).as_posix()), "uriBaseId": SRCROOT}


def fingerprint(item: Finding) -> str:
    """Stable across runs and line moves: the code, the variable and the op, hashed."""
    key = "\0".join((item.code, item.variable or "", item.op or ""))
    return hashlib.sha256(key.encode()).hexdigest()[:32]
