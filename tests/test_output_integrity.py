"""What gradcheck writes, tried as an attacker would: a repository plants a link or a FIFO at a
report path, a script is a link to a file outside the project, a file name forges a diff's
headers, a name in a Markdown report mentions someone. The effect that matters is checked: the
file outside is untouched, nothing hangs, the diff is one file, no one is notified."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from gradcheck_cli.cli import ExitCode, command
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.file_writes import write_file
from gradcheck_cli.findings.advice.edits import git_quoted, unified_diff
from gradcheck_cli.fixing import FileChange, write_changes
from gradcheck_cli.reporters.markdown import _inline
from tests.cli_runs import invoke
from tests.docs_pages import ROOT

MODEL = ROOT / "sample_models" / "faulty_weights_tf1.py"
SECRET = "outside the workspace\n"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A checked-out repository (the working folder) and a file outside it."""
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return project, outside


@pytest.mark.parametrize(
    "option",
    [["-o", "gradcheck.sarif"], ["--also", "sarif:gradcheck.sarif"]]
    + [["--write-baseline", "gradcheck.sarif"]],
)
def test_a_planted_link_at_a_report_path_is_refused_and_its_target_untouched(
    workspace: tuple[Path, Path], option: list[str]
) -> None:
    project, outside = workspace
    (project / "gradcheck.sarif").symlink_to(outside)
    code, out, err = invoke(command, [MODEL, "--loss", "loss", *option])
    assert code == ExitCode.ERROR
    assert "cannot write gradcheck.sarif: it is a symbolic link" in err
    assert len(err.strip().splitlines()) == 1, err
    assert outside.read_text() == SECRET


def test_a_dangling_link_creates_nothing_where_it_points(workspace: tuple[Path, Path]) -> None:
    project, outside = workspace
    target = outside.parent / "created-by-gradcheck"
    (project / "gradcheck.sarif").symlink_to(target)
    code, _, err = invoke(command, [MODEL, "--loss", "loss", "--also", "sarif:gradcheck.sarif"])
    assert code == ExitCode.ERROR, err
    assert not target.exists()


def test_a_fifo_at_a_report_path_is_refused_without_blocking(
    workspace: tuple[Path, Path],
) -> None:
    project, _ = workspace
    os.mkfifo(project / "report.json")
    code, _, err = invoke(command, [MODEL, "--loss", "loss", "-o", "report.json"])
    assert code == ExitCode.ERROR
    assert "not a regular file" in err


def test_write_file_replaces_the_file_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    report.write_text("old")
    report.chmod(0o640)
    write_file(report, "new")
    assert report.read_text() == "new"
    assert stat.S_IMODE(report.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]  # no partial file left
    # A link planted after the check is refused, not written through.
    link = tmp_path / "link.txt"
    link.symlink_to(report)
    with pytest.raises(GradcheckError, match="symbolic link"):
        write_file(link, "through the link")
    assert report.read_text() == "new"


def test_a_new_report_gets_the_mode_the_umask_allows(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_file(tmp_path / "new.txt", "text")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def _change(path: Path, after: str) -> FileChange:
    return FileChange(str(path), path.read_text(), after)


def test_fix_leaves_a_script_that_links_outside_the_project_as_it_is(
    workspace: tuple[Path, Path],
) -> None:
    project, outside = workspace
    (project / "train.py").symlink_to(outside)
    problems = write_changes([_change(project / "train.py", "fixed\n")])
    assert len(problems) == 1 and "symbolic link" in problems[0], problems
    assert "--fix writes only regular files inside the project" in problems[0]
    assert outside.read_text() == SECRET
    assert (project / "train.py").is_symlink()


def test_fix_leaves_a_file_outside_the_project_as_it_is(workspace: tuple[Path, Path]) -> None:
    _, outside = workspace
    problems = write_changes([_change(outside, "fixed\n")])
    assert len(problems) == 1 and "outside the project" in problems[0], problems
    assert outside.read_text() == SECRET


def test_fix_writes_inside_the_repository_root_from_a_subfolder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "src").mkdir()
    (tmp_path / "tools").mkdir()
    script = tmp_path / "src" / "train.py"
    script.write_text("before\n")
    monkeypatch.chdir(tmp_path / "tools")
    assert write_changes([_change(script, "after\n")]) == []
    assert script.read_text() == "after\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_fix_run_as_root_keeps_the_file_s_owner_group_and_mode(
    workspace: tuple[Path, Path],
) -> None:
    project, _ = workspace
    script = project / "train.py"
    script.write_text("before\n")
    os.chown(script, 1234, 2345)
    script.chmod(0o640)
    assert write_changes([_change(script, "after\n")]) == []
    status = script.stat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (1234, 2345, 0o640)
    assert script.read_text() == "after\n"


def test_a_file_name_with_line_breaks_is_quoted_in_the_diff_as_git_quotes_it(
    tmp_path: Path,
) -> None:
    name = "train.py\n+++ evil.py\n@@ -1 +1 @@"
    diff = unified_diff(name, name, "x = 1\n", "x = 2\n")
    headers = [line for line in diff.splitlines() if line.startswith(("---", "+++"))]
    assert headers == [f"--- {git_quoted('a/' + name)}", f"+++ {git_quoted('b/' + name)}"]
    assert git_quoted("a/é.py") == '"a/\\303\\251.py"'  # git's own quoting, core.quotePath
    # git itself reads the quoted name back: the patch applies to that one file.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / name).write_text("x = 1\n")
    subprocess.run(["git", "apply"], input=diff, text=True, cwd=tmp_path, check=True)
    assert (tmp_path / name).read_text() == "x = 2\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".git") == [name]


def test_markdown_prose_mentions_no_one_and_links_nothing() -> None:
    text = _inline("pass @octocat's tensor to www.example.com or https://example.com, see #12")
    assert "@octocat" not in text and "www.example" not in text and "https://" not in text
    assert "#12" not in text
    # What the reader sees is the same text: the zero-width spaces render as nothing.
    shown = text.replace("&#8203;", "").replace("\\'", "'")
    assert shown == "pass @octocat's tensor to www.example.com or https://example.com, see #12"
