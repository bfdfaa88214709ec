"""SARIF 2.1.0 for code scanning: one run per model, every rule documented, every result at a
file and line, stable fingerprints, and a failed run for a model that could not be checked."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import RULES, Rule
from gradcheck_cli.findings.source import notebook_cell
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import CheckFailure
from gradcheck_cli.reporters.rule_docs import rule_sections_markdown

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
# The project's home page, as the package metadata names it (pyproject.toml's [project.urls]).
INFORMATION_URI = "https://github.com/gradcheck/gradcheck"
SRCROOT = "%SRCROOT%"
FINGERPRINT = "gradcheck/v1"

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_GROUP_TAGS = {
    "0": ("gradcheck", "could-not-model"),
    "1": ("gradcheck", "dead-variable", "correctness"),
    "2": ("gradcheck", "suspicious"),
}
_RULE_INDEX = {code: index for index, code in enumerate(RULES)}
_SAVED_MODEL_KINDS = ("savedmodel", "savedmodel-tf1")
# SourceInfo kinds of a model checked in the Python process, whose path is a `<...>` label.
_IN_PROCESS_KINDS = ("keras", "function")


def render_sarif(checked: Sequence[Report | CheckFailure]) -> str:
    """A SARIF log with one run per model, in order: a report without findings is a run without
    results; a model that could not be checked is a run whose invocation failed, saying why."""
    categories = _categories(checked) if len(checked) > 1 else [None] * len(checked)
    log = {
        "$schema": SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [
            _failed_run(item, category) if isinstance(item, CheckFailure) else _run(item, category)
            for item, category in zip(checked, categories)
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _categories(checked: Sequence[Report | CheckFailure]) -> list[str]:
    """Code scanning keeps one analysis per category, and refuses two runs of one category in a
    file: each model's run gets its own; a second run of one path (the second gradient request
    of a script under `gradcheck run`) gets its number."""
    categories = []
    seen: dict[str, int] = {}
    for item in checked:
        model = display_path(item.path if isinstance(item, CheckFailure) else item.source.path)
        seen[model] = seen.get(model, 0) + 1
        number = "" if seen[model] == 1 else f"{seen[model]}/"
        categories.append(f"gradcheck/{model}/{number}")
    return categories


def _run(report: Report, category: str | None) -> dict[str, Any]:
    return _run_of(
        results=[
            _result(report, item, key)
            for item, key in zip(report.findings, fingerprints(report.findings))
        ],
        invocation={"executionSuccessful": True},
        properties={
            "model": display_path(report.source.path),
            "kind": report.source.kind,
            "loss": report.source.loss,
            "summary": report.summary,
        },
        category=category,
    )


def _failed_run(failure: CheckFailure, category: str | None) -> dict[str, Any]:
    """No results, and an invocation that did not succeed, with the error as its notification."""
    model = artifact_location(SourceLocation(failure.path, 1))
    notification = {
        "level": "error",
        "message": {"text": failure.error},
        "locations": [{"physicalLocation": {"artifactLocation": model}}],
    }
    properties = {"model": display_path(failure.path), "error": failure.error}
    if failure.kind is not None:
        properties["kind"] = failure.kind
    return _run_of(
        results=[],
        invocation={"executionSuccessful": False, "toolExecutionNotifications": [notification]},
        properties=properties,
        category=category,
    )


def _run_of(
    *,
    results: list[dict[str, Any]],
    invocation: dict[str, Any],
    properties: dict[str, Any],
    category: str | None,
) -> dict[str, Any]:
    run: dict[str, Any] = {
        "tool": {"driver": _driver()},
        "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().as_uri().rstrip("/") + "/"}},
        "invocations": [invocation],
        "results": results,
        "properties": properties,
    }
    if category is not None:
        run["automationDetails"] = {"id": category}
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
    summary = f"**{rule.code} {rule.name}**: {rule.summary}"
    return f"{summary}\n\n{rule_sections_markdown(rule, level=3)}"


def _result(report: Report, item: Finding, key: str) -> dict[str, Any]:
    parts = [item.message]
    still_cut = (
        report.still_cut.get(item.variable or "") if item.severity is Severity.ERROR else None
    )
    if still_cut:
        parts.append(still_cut)
    if item.hint is not None:
        parts.append(f"fix: {item.hint}")
    text = "\n".join(parts)
    result: dict[str, Any] = {
        "ruleId": item.code,
        "level": _LEVEL[item.severity],
        "message": {"text": text},
        "locations": [_location(report, item)],
        "partialFingerprints": {FINGERPRINT: key},
    }
    if item.code in _RULE_INDEX:
        result["ruleIndex"] = _RULE_INDEX[item.code]
    if item.suppression is not None:
        result["suppressions"] = [
            {"kind": item.suppression.kind, "justification": item.suppression.justification}
        ]
    if report.baselined:  # code scanning tells accepted results from new ones
        accepted = item.suppression is not None and item.suppression.baseline
        result["baselineState"] = "unchanged" if accepted else "new"
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
    # Code scanning refuses a result without a file: without a source line, the result points
    # at the model's own file, line 1 (a live keras.Model or function has none).
    model = _model_artifact(report.source.path, report.source.kind)
    if model is not None:
        location["physicalLocation"] = {"artifactLocation": model, "region": {"startLine": 1}}
    return location


def _model_artifact(path: str, kind: str) -> dict[str, str] | None:
    """The file that stands for a model: a SavedModel's saved_model.pb (or .pbtxt), the .keras
    file, the script; None for a model that lives only in the Python process."""
    if kind in _IN_PROCESS_KINDS and path.startswith("<"):
        return None
    folder = Path(path)
    if kind in _SAVED_MODEL_KINDS:
        text = folder / "saved_model.pbtxt"
        binary = folder / "saved_model.pb"
        path = str(text if text.is_file() and not binary.is_file() else binary)
    return artifact_location(SourceLocation(path, 1))


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


def fingerprint(item: Finding, occurrence: int = 1) -> str:
    """Stable across runs and line moves: the code, the variable and the op, hashed; the second
    and later findings of one run with all three the same (two GC002 notes) are numbered."""
    parts = [item.code, item.variable or "", item.op or ""]
    if occurrence > 1:
        parts.append(str(occurrence))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def fingerprints(findings: Sequence[Finding]) -> list[str]:
    """Each finding's fingerprint, distinct within one run (the findings come sorted)."""
    seen: dict[tuple[str, str | None, str | None], int] = {}
    keys = []
    for item in findings:
        same = (item.code, item.variable, item.op)
        seen[same] = seen.get(same, 0) + 1
        keys.append(fingerprint(item, seen[same]))
    return keys
