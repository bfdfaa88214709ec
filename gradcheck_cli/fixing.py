"""`--fix` and `--diff`: the fixes that are code, applied to the user's scripts only once a
check of the fixed text finds each fixed variable trained."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.file_writes import write_file
from gradcheck_cli.findings.advice.edits import CodeFix, applied, unified_diff
from gradcheck_cli.findings.advice.transform_source import Rewrite
from gradcheck_cli.run import ModelCheck, Outcome, Policy, check_models, check_script
from gradcheck_cli.source_code.debug_info import is_user_file
from gradcheck_cli.source_code.files import bounded_text


@dataclass(frozen=True)
class Fixed:
    """One dead variable a code fix gives a gradient: which fix, in which file, at which line."""

    model: str
    variable: str
    what: str
    file: str
    line: int


@dataclass(frozen=True)
class FileChange:
    """One file's text as gradcheck read it and with the verified fixes applied."""

    path: str
    before: str
    after: str

    def diff(self) -> str:
        return unified_diff(self.path, display_path(self.path), self.before, self.after)


@dataclass
class Fixes:
    """What `--fix` found for a run: the verified changes, the variables they fix, and the
    outcomes of the check of the fixed text (what is left)."""

    changes: list[FileChange] = field(default_factory=list)
    fixed: list[Fixed] = field(default_factory=list)
    # Variables whose code fix did not give them a gradient when checked: left in words.
    unverified: list[tuple[str, str]] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)


def find_fixes(
    checks: Sequence[ModelCheck],
    outcomes: Sequence[Outcome],
    policy: Policy,
    script_arguments: tuple[str, ...] | None = None,
) -> Fixes:
    """The code fixes of every model's reports, each model re-checked with its fixed text;
    a fix is kept only if that check finds its variable no longer dead (at most two re-checks
    a model: the second without the fixes the first did not confirm)."""
    found = Fixes()
    for check in checks:
        own = [o for o in outcomes if o.model == check.model]
        # A file an earlier model's fixes change is left to that model's fixes (checked with
        # them); this model's report then still tells its own in words.
        changed = {change.path for change in found.changes}
        wanted = {
            name: fix
            for name, fix in _code_fixes(own).items()
            if not changed.intersection(fix.files)
        }
        kept, texts, after, unconfirmed = _verified(wanted, check, policy, script_arguments)
        found.unverified += [(check.model, name) for name in unconfirmed]
        if not kept:
            found.outcomes += own
            continue
        found.outcomes += after
        found.changes += [FileChange(path, *texts[path]) for path in texts]
        for variable, fix in kept.items():
            first = fix.edits[0]
            where = first.location
            found.fixed.append(Fixed(check.model, variable, fix.what, where.file, where.line))
    return found


def _code_fixes(outcomes: Sequence[Outcome]) -> dict[str, CodeFix]:
    """The code fix of each dead variable of the outcomes' script reports, by variable, where
    every file it edits is one of the user's Python files."""
    fixes: dict[str, CodeFix] = {}
    for report in (outcome.report for outcome in outcomes if outcome.report is not None):
        for name in report.fixable:
            fix = report.code_fixes[name]
            if all(_editable(file) for file in fix.files):
                fixes.setdefault(name, fix)
    return fixes


def _editable(file: str) -> bool:
    return is_user_file(file) and os.path.isfile(file)


def _verified(
    wanted: dict[str, CodeFix],
    check: ModelCheck,
    policy: Policy,
    script_arguments: tuple[str, ...] | None,
) -> tuple[dict[str, CodeFix], dict[str, tuple[str, str]], list[Outcome], list[str]]:
    """The fixes a check of the fixed text confirms, the (before, after) text of each file they
    change, that check's outcomes, and the variables whose fixes it did not confirm."""
    candidates = dict(wanted)
    unconfirmed: list[str] = []
    for _ in range(2):
        texts = _fixed_texts(candidates)
        # A fix whose edits are no longer found in its file is left to the words.
        candidates = {
            name: fix for name, fix in candidates.items() if all(f in texts for f in fix.files)
        }
        if not candidates:
            break
        sources = tuple((path, after) for path, (_, after) in texts.items())
        after_outcomes = _checked(check, sources, policy, script_arguments)
        still_dead = {v.name for o in after_outcomes if o.report is not None for v in o.report.dead}
        failed = any(o.report is None for o in after_outcomes)
        confirmed = {n: f for n, f in candidates.items() if n not in still_dead and not failed}
        if confirmed == candidates:
            return candidates, texts, after_outcomes, unconfirmed
        unconfirmed += [name for name in candidates if name not in confirmed]
        candidates = confirmed
    return {}, {}, [], unconfirmed


def _fixed_texts(fixes: dict[str, CodeFix]) -> dict[str, tuple[str, str]]:
    """(before, after) of each file the fixes edit, where every edit of that file applies."""
    by_file: dict[str, list[Rewrite]] = {}
    for fix in fixes.values():
        for edit in fix.edits:
            by_file.setdefault(edit.location.file, []).append(edit)
    texts = {}
    for path, edits in by_file.items():
        before = bounded_text(path)
        if before is not None and "\ufffd" in before:  # not UTF-8: written back, it would not be
            before = None
        after = None if before is None else applied(before, edits)
        if before is not None and after is not None and after != before:
            texts[path] = (before, after)
    return texts


def _checked(
    check: ModelCheck,
    sources: tuple[tuple[str, str], ...],
    policy: Policy,
    script_arguments: tuple[str, ...] | None,
) -> list[Outcome]:
    # The script's own output was shown by the first check: once is enough.
    options = replace(check.options, quiet=True)
    if script_arguments is not None:
        return check_script(check.model, script_arguments, options, policy, sources=sources)
    return check_models([replace(check, options=options, sources=sources)], policy)


def project_roots(named: Sequence[Path] = ()) -> list[Path]:
    """The folders --fix may write in, resolved: the working folder, the root of the git
    repository that holds it, and the `named` folders (of the scripts and models the user
    named on the command line)."""
    here = Path(os.path.realpath(Path.cwd()))
    roots = [here, *(Path(os.path.realpath(folder)) for folder in named)]
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            roots.append(folder)
            break
    return roots


def _outside_the_project(path: Path, roots: Sequence[Path]) -> str | None:
    """Why --fix will not write `path` (a link, not a regular file, outside every root)."""
    if path.is_symlink():
        return f"it is a symbolic link (to {os.readlink(path)})"
    resolved = Path(os.path.realpath(path))
    if not resolved.is_file():
        return "it is not a regular file"
    if not any(resolved.is_relative_to(root) for root in roots):
        return f"it is outside the project ({resolved})"
    return None


def write_changes(changes: Sequence[FileChange], named: Sequence[Path] = ()) -> list[str]:
    """Write every changed file (whole, keeping its owner, group and mode) if each still holds
    the text gradcheck read; else write none. A file that is a link, not a regular file, or
    outside the project (`project_roots(named)`) is left as it is. The one-line reason for
    each file left unwritten."""
    problems = [
        f"{display_path(change.path)} changed since gradcheck read it; nothing written "
        "(run the check again)"
        for change in changes
        if bounded_text(change.path) != change.before
    ]
    if problems:
        return problems
    roots = project_roots(named)
    for change in changes:
        path = Path(change.path)
        outside = _outside_the_project(path, roots)
        if outside is not None:
            problems.append(
                f"{display_path(change.path)} left as it is: {outside}; --fix writes only "
                "regular files inside the project (the working folder, its repository, the "
                "folders of what the command names)"
            )
            continue
        try:
            write_file(path, change.after, keep_owner=True)
        except GradcheckError as error:
            problems.append(str(error))
        except OSError as error:
            problems.append(f"cannot write {display_path(change.path)}: {error.strerror}")
    return problems
