"""The golden harness gives the same text on any machine: temporary paths of any length, any
COLUMNS, a user's colour settings. Hand-built reports, no TensorFlow.

The real goldens are checked the same way with a long TMPDIR and COLUMNS=57 and 200: the
commands are in the README's Development section.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gradcheck_cli.analysis.verdicts import Blocker, Status
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.report import Report, SourceInfo
from tests.golden import (
    REPO,
    WIDTH,
    assert_matches_golden,
    fixed_machine,
    golden_terminal,
    leaked_machine_paths,
    redacted,
)
from tests.reporters.factories import verdict

SHORT = Path("/t")
LONG = Path("/var/folders/a-much-much-longer-temporary-path-0123456789ab") / ("deep" * 20)


def _report_under(scratch: Path) -> Report:
    """A SavedModel under `scratch` with a blocked variable whose story needs wrapping."""
    blocked = verdict(
        "bucket_offset_with_a_long_enough_name_to_wrap",
        Status.BLOCKED,
        blockers=(Blocker("Cast", "Cast", Reason.INTEGER_DTYPE, "a cast to int32 " * 6, "fn"),),
    )
    note = Finding(
        "GC005",
        "saved-model-without-source-lines",
        Severity.WARNING,
        "this SavedModel has no debug info, so cuts are located by op and name scope",
    )
    source = SourceInfo(str(scratch / "without_debug_info"), "savedmodel", "loss")
    return Report(source, (blocked, verdict("kernel", Status.OK)), (note,))


@pytest.mark.parametrize("columns", ["57", "200"])
def test_the_text_does_not_depend_on_the_temporary_path_or_the_terminal(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed_machine(monkeypatch)
    # Set after the harness's own clean-up: the rendering itself must not read them.
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("FORCE_COLOR", "1")
    short, long = (golden_terminal(redacted(_report_under(s), s)) for s in (SHORT, LONG))
    assert short == long
    assert short.startswith("gradcheck <tmp>/without_debug_info (savedmodel), loss loss\n")
    lines = short.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert any(len(line) > WIDTH - 10 for line in lines)  # it did wrap, at the fixed width
    assert "\x1b[" not in short


def test_the_harness_renders_from_the_repository_with_no_terminal_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, value in {"COLUMNS": "57", "NO_COLOR": "1", "TERM": "dumb"}.items():
        monkeypatch.setenv(name, value)
    fixed_machine(monkeypatch)
    assert Path.cwd() == REPO
    assert not {"COLUMNS", "NO_COLOR", "TERM"} & set(os.environ)


def test_a_machine_path_left_in_the_text_fails_on_every_machine(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    unredacted = golden_terminal(_report_under(tmp_path))
    assert leaked_machine_paths(unredacted)
    with pytest.raises(AssertionError, match="machine paths"):
        assert_matches_golden(unredacted, "savedmodel_without_debug_info.txt", request)
