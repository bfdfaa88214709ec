"""Golden files that read the same on every machine: one way to render, redact and compare them.

A golden is rendered at a fixed width, with no colour, from the repository root (so repository
paths print relative), with the test's temporary folder already renamed `<tmp>` in the report:
redacting before rendering keeps line wrapping independent of the temporary path's length.
Whatever machine path still reaches the text fails the comparison on every machine alike.
Files are UTF-8 whatever the locale. `--update-goldens` rewrites them instead of comparing.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters import TerminalOptions
from gradcheck_cli.reporters.terminal import render_terminal

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "reporters" / "golden"
WIDTH = 80
TMP = "<tmp>"
# What a terminal, the user or the locale may set that rendering could follow.
MACHINE_ENVIRONMENT = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM", "CLICOLOR_FORCE")


def fixed_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Render from the repository root with no terminal settings from the environment."""
    monkeypatch.chdir(REPO)
    for name in MACHINE_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


def redacted(report: Report, scratch: Path) -> Report:
    """The report with the temporary folder `scratch` named `<tmp>` in its source path."""
    path = report.source.path
    if not path.startswith(str(scratch)):
        return report
    source = replace(report.source, path=TMP + path.removeprefix(str(scratch)))
    return replace(report, source=source)


def golden_terminal(report: Report, *, width: int = WIDTH, focus: str | None = None) -> str:
    """The terminal report as goldens hold it: no colour, `width` columns."""
    return render_terminal(report, TerminalOptions(color=False, width=width, focus=focus))


def machine_paths() -> list[str]:
    """Folders whose names differ between machines and must never reach a golden."""
    temporary = tempfile.gettempdir()
    folders = {str(REPO), temporary, str(Path(temporary).resolve()), os.path.expanduser("~")}
    return sorted(folder.rstrip(os.sep) + os.sep for folder in folders if len(folder) > 1)


def leaked_machine_paths(text: str) -> list[str]:
    """The machine folders in `text`, a long path folded over several lines included."""
    unwrapped = re.sub(r"\n\s*", "", text)
    return [folder for folder in machine_paths() if folder in text or folder in unwrapped]


def assert_matches_golden(text: str, name: str, request: pytest.FixtureRequest) -> None:
    """Compare `text` with the golden file `name`, or rewrite it under --update-goldens."""
    leaked = leaked_machine_paths(text)
    assert not leaked, f"machine paths {leaked} in the output for {name}; redact them first"
    golden = GOLDEN / name
    if request.config.getoption("--update-goldens"):
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden file {name}; run with --update-goldens"
    assert text == golden.read_text(encoding="utf-8")


def report_text(report: Report, scratch: Path | None = None) -> str:
    """Everything a report says, as goldens hold it: its JSON (verdicts, blockers, explanations,
    findings) and its terminal rendering, with `scratch` named `<tmp>`."""
    from gradcheck_cli.reporters.json_reporter import render_json

    if scratch is not None:
        report = redacted(report, scratch)
    # Wide, so that no line wraps: TensorFlow numbers custom gradients by a counter of the
    # process, redacted below, and the counter's digits must not move a line break.
    text = render_json(report) + "\n" + golden_terminal(report, width=1000)
    return re.sub(r"CustomGradient-\d+", "CustomGradient-<n>", text)


def assert_reports_match_golden(
    texts: dict[str, str], name: str, request: pytest.FixtureRequest
) -> None:
    """Compare several reports' `report_text`s, by key, with the golden file `name` (one
    JSON object), or rewrite it under --update-goldens. A changed report is named by its key."""
    import json

    leaked = {key: leaked_machine_paths(text) for key, text in texts.items()}
    leaked = {key: paths for key, paths in leaked.items() if paths}
    assert not leaked, f"machine paths in the reports of {name}: {leaked}; redact them first"
    golden = GOLDEN / name
    if request.config.getoption("--update-goldens"):
        golden.write_text(json.dumps(texts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert golden.is_file(), f"no golden file {name}; run with --update-goldens"
    expected = json.loads(golden.read_text(encoding="utf-8"))
    assert sorted(texts) == sorted(expected), name
    changed = [key for key in sorted(texts) if texts[key] != expected[key]]
    for key in changed:
        assert texts[key] == expected[key], f"{name}: the report of {key} changed"
