"""The pytest integration: a `gradcheck` fixture, a `--gradcheck` option and a `gradcheck` marker.

pytest imports every installed plugin when it starts, in every project: this module imports
neither TensorFlow nor rich. The library is imported inside the fixture's methods and the hook.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gradcheck_cli.options import OPTION_NAMES, CheckOptions, check_options, takes_check_options

if TYPE_CHECKING:
    from gradcheck_cli.config import Settings
    from gradcheck_cli.findings.report import Report

_DEFAULTS = CheckOptions()
_MARKER_HELP = (
    f"gradcheck({', '.join(f'{name}={getattr(_DEFAULTS, name)!r}' for name in OPTION_NAMES)}): "
    "after the test, check every SavedModel the test wrote under tmp_path and fail it if a "
    "trainable variable can never train"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck")
    group.addoption(
        "--gradcheck",
        action="store_true",
        default=False,
        help="after each test, check every SavedModel it wrote under tmp_path for trainable "
        "variables its loss can never train (the test fails with the report)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)


class Gradcheck:
    """What the `gradcheck` fixture gives a test: the library's `check` and its assertion, with
    the project's `[tool.gradcheck]` settings (allow-dead, select, ignore, the loss of a path)
    applied as the command line applies them."""

    def __init__(self, settings: Settings | None = None) -> None:
        from gradcheck_cli.config import Settings

        self._settings = settings if settings is not None else Settings()

    @takes_check_options()
    def check(
        self, model: Any, loss: str | None = None, *, variables: Any = None, **options: Any
    ) -> Report:
        """`gradcheck_cli.check`: the report on a path, a compiled Keras model or a function."""
        chosen = check_options("Gradcheck.check", {"loss": loss, **options})
        return _checked(model, chosen, self._settings, variables)

    @takes_check_options()
    def assert_no_dead_variables(
        self, model: Any, loss: str | None = None, *, variables: Any = None, **options: Any
    ) -> Report:
        """Fail the test with the readable report if a finding fails it as it would fail
        `gradcheck` on the command line (a dead variable no setting accepts)."""
        __tracebackhide__ = True  # a failing test shows the report, not gradcheck's frames
        chosen = check_options("Gradcheck.assert_no_dead_variables", {"loss": loss, **options})
        report = _checked(model, chosen, self._settings, variables)
        return _require_passing(report, self._settings)


def _checked(model: Any, options: CheckOptions, settings: Settings, variables: Any) -> Report:
    """The report with the project's settings: its loss for a path the test did not give one,
    its allow-dead patterns before the test's own, its select and ignore."""
    from gradcheck_cli.api import check_with
    from gradcheck_cli.findings.policy import apply_policy

    if isinstance(model, (str, os.PathLike)) and options.loss is None:
        options = replace(options, loss=settings.loss_for(model))
    options = replace(options, allow_dead=settings.allow_dead + options.allow_dead)
    report = check_with(model, options, variables)
    return apply_policy(report, select=settings.select, ignore=settings.ignore)


def _require_passing(report: Report, settings: Settings) -> Report:
    """`report`, or AssertionError with the readable report if a finding fails the run under
    the project's `fail-on`, as `gradcheck`'s exit code says."""
    __tracebackhide__ = True
    from gradcheck_cli.api import readable_report

    if any(item.severity in settings.fail_on.severities for item in report.findings):
        raise AssertionError(readable_report(report))
    return report


def _project_settings(config: pytest.Config) -> Settings:
    """The `[tool.gradcheck]` settings that govern the test run's root folder (read once)."""
    if _SETTINGS not in config.stash:
        from gradcheck_cli.config import load_settings

        config.stash[_SETTINGS] = load_settings(cwd=config.rootpath)
    return config.stash[_SETTINGS]


_SETTINGS = pytest.StashKey["Settings"]()


@pytest.fixture
def gradcheck(pytestconfig: pytest.Config) -> Gradcheck:
    """Check models for trainable variables their loss can never train."""
    return Gradcheck(_project_settings(pytestconfig))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    # A test that already failed is not checked: its own failure says more.
    result = yield
    marker = item.get_closest_marker("gradcheck")
    if marker is None and not item.config.getoption("gradcheck"):
        return result
    funcargs: dict[str, Any] = getattr(item, "funcargs", {})
    folder = funcargs.get("tmp_path") or funcargs.get("tmpdir")
    if folder is None:
        return result
    try:
        options = check_options("pytest.mark.gradcheck", marker.kwargs if marker else {})
    except TypeError as error:
        failures = [str(error)]  # a misspelt option must not pass as "no dead variables"
    else:
        failures = _dead_saved_models(Path(folder), options, _project_settings(item.config))
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
    return result


def _dead_saved_models(folder: Path, options: CheckOptions, settings: Settings) -> list[str]:
    """The report of every SavedModel under `folder` that has a dead variable or cannot be read.

    A SavedModel that cannot be analysed fails the test too: the user asked for it to be
    checked, and a silent pass would read as "no dead variables".
    """
    from gradcheck_cli.api import readable_report
    from gradcheck_cli.errors import GradcheckError

    failures = []
    for model in sorted({pb.parent for pb in folder.rglob("saved_model.pb")}):
        try:
            report = _checked(model, options, settings, None)
        except GradcheckError as error:
            failures.append(f"gradcheck could not analyse the SavedModel {model}: {error}")
            continue
        try:
            _require_passing(report, settings)
        except AssertionError:
            failures.append(readable_report(report))
    return failures
