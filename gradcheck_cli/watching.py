"""`watch()` and the Keras callback: `gradcheck run`'s check of the first step, in-process."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
import types
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.policy import apply_policy
from gradcheck_cli.findings.report import Report
from gradcheck_cli.options import CheckOptions, check_options
from gradcheck_cli.pipeline import run_reports
from gradcheck_cli.reporters import Format, TerminalOptions, auto_color, render
from gradcheck_cli.reporters.verdict_text import verdict_parts

OnDead = Literal["stop", "continue"]
ON_DEAD = ("stop", "continue")


class DeadVariablesError(Exception):
    """Raised in the program's code at its first training step, before any weight changes,
    when a variable it trains can never get gradient (`on_dead="stop"`). `reports`: one per
    gradient request of the step, as `gradcheck run` gives them."""

    def __init__(self, reports: list[Report]) -> None:
        self.reports = reports
        names = sorted({verdict.name for report in reports for verdict in report.dead})
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        super().__init__(
            f"gradcheck stopped training before its first weight change: "
            f"{len(names)} dead variable{'' if len(names) == 1 else 's'} ({shown}); the report "
            'is above; on_dead="continue" shows it and trains on'
        )

    def _render_traceback_(self) -> list[str]:
        """What IPython shows of it (its documented hook): this one line, under the report in
        the cell's output, rather than a traceback through gradcheck's hooks."""
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class _Settings:
    on_dead: OnDead
    options: CheckOptions
    what: str  # what trains, in the notes: "training", "fit"


class Watch:
    """The check that `watch()` installed: a context manager, whose exit removes whatever is
    left of it (and checks a step that asked for gradients but changed no weight)."""

    def __init__(self, settings: _Settings) -> None:
        from gradcheck_cli.run_mode.in_process import InProcessCheck

        self._settings = settings
        self._check = InProcessCheck(*_callbacks(settings))
        self._check.install()

    @property
    def checked(self) -> bool:
        """Whether the first training step was checked (and its report shown)."""
        return self._check.delivered

    def close(self) -> None:
        """Check what was asked so far, if not checked yet, and remove every hook."""
        __tracebackhide__ = True
        self._check.finish()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        __tracebackhide__ = True
        if isinstance(error, Exception):
            # The block failed: after it asked for gradients, the report comes first (the
            # failure is often what gradcheck explains); its own error goes on.
            self._check.finish(error)
            return
        if error is not None:
            self._check.uninstall()
            return
        self.close()


def watch(
    on_dead: OnDead = "stop",
    *,
    allow_dead: Mapping[str, str] | Iterable[str] = (),
    verify: bool = False,
    all_cuts: bool = False,
) -> Watch:
    """Check this process's first training step, as `gradcheck run` checks a script's.

    Call it at the top of a notebook or script, before the model is built, or use it as a
    context manager (`with gradcheck_cli.watch(): ...`). The gradient requests of the first
    step (a Keras `fit`, a `tf.GradientTape` step, TF1's `minimize`) are checked just before
    the first weight changes; the report is shown (HTML in Jupyter, the terminal report on
    stderr elsewhere), or one line when nothing is wrong. Then, if a variable is dead,
    `on_dead="stop"` raises DeadVariablesError there, before any weight changes, and
    `"continue"` lets training go on. Uncaught, the error ends a script with the report and
    one line (exit code 1), and a notebook cell with the report and one line, with no traceback
    through gradcheck's hooks. A step that raises after it asked for gradients and
    before any weight changed (Keras's "No gradients provided for any variable" from its
    optimizer, a traced step or a `with` block that fails) is checked then: the report comes
    first, and the step's own error goes on. Every hook is removed once the step is checked,
    or when the `with` block ends.

    `allow_dead`, `verify` and `all_cuts` do what they do for `check`.
    """
    return Watch(_settings("watch", on_dead, allow_dead, verify, all_cuts, "training"))


def keras_callback(
    on_dead: OnDead = "stop",
    *,
    allow_dead: Mapping[str, str] | Iterable[str] = (),
    verify: bool = False,
    all_cuts: bool = False,
) -> Any:
    """A Keras callback that checks the first step of the `fit` it is given to, as `watch()`
    does: `model.fit(x, y, callbacks=[gradcheck_cli.keras_callback()])`.

    Keras 3's callback, or Keras 2's (`tf_keras`) when TF_USE_LEGACY_KERAS is set or only
    `tf_keras` is imported. With a dead variable, `on_dead="stop"` raises DeadVariablesError
    from `fit` before its first weight change; `"continue"` lets it train. A step that Keras
    aborts after it asked for gradients ("No gradients provided for any variable") is reported
    before Keras's error goes on. Every hook is removed when the step is checked, or when `fit`
    ends, however it ends (an error from any callback, an interrupt: then as the error is let
    go, at the end of the `except` block that caught it).
    """
    from gradcheck_cli.run_mode.in_process import keras_callback_class

    settings = _settings("keras_callback", on_dead, allow_dead, verify, all_cuts, "fit")
    return _callback_class(keras_callback_class())(settings)


def _calling_callback_list(callback: object) -> object | None:
    """The Keras CallbackList whose method is calling `callback` now (the one `fit` made)."""
    frame = sys._getframe(2)
    while frame is not None:
        caller = frame.f_locals.get("self")
        held = getattr(caller, "callbacks", None)
        if isinstance(held, list) and any(c is callback for c in held):
            return caller
        frame = frame.f_back
    return None


@functools.cache
def _callback_class(keras_callback_base: type) -> type:
    """gradcheck's callback, a subclass of that Keras's own Callback class (one per Keras)."""
    made = types.new_class("GradcheckCallback", (_FitCheck, keras_callback_base))
    made.__module__ = __name__
    return made


class _FitCheck:
    """The callback's hooks (mixed with the Keras Callback class): the check installed when
    `fit` begins, removed when it ends."""

    def __init__(self, settings: _Settings) -> None:
        super().__init__()
        self._gradcheck_settings = settings
        self._gradcheck: Any = None

    def on_train_begin(self, logs: object = None) -> None:
        from gradcheck_cli.run_mode.in_process import InProcessCheck

        settings = self._gradcheck_settings
        check = self._gradcheck = InProcessCheck(*_callbacks(settings))
        check.install(getattr(self, "model", None))
        # Keras calls no callback when `fit` ends with an error (a callback's own, an
        # interrupt, another callback's stop in on_train_begin): the callback list `fit` made
        # for this call, freed as the call ends however it ends, takes the hooks with it.
        fitting = _calling_callback_list(self)
        if fitting is not None:
            weakref.finalize(fitting, check.uninstall)

    def on_train_end(self, logs: object = None) -> None:
        __tracebackhide__ = True
        if self._gradcheck is not None:
            check, self._gradcheck = self._gradcheck, None
            check.finish()


def _settings(
    caller: str,
    on_dead: object,
    allow_dead: Mapping[str, str] | Iterable[str],
    verify: bool,
    all_cuts: bool,
    what: str,
) -> _Settings:
    if on_dead not in ON_DEAD:
        raise ValueError(f"{caller}(on_dead={on_dead!r}): on_dead is 'stop' or 'continue'")
    given = {"allow_dead": allow_dead, "verify": verify, "all_cuts": all_cuts}
    # In a notebook the report is the HTML page, which draws the model's map; a terminal's
    # report has no map, and a check that draws none pays nothing for it.
    options = replace(check_options(caller, given), model_map=_in_jupyter())
    return _Settings(on_dead, options, what)  # type: ignore[arg-type]


def _callbacks(
    settings: _Settings,
) -> tuple[Callable[[Any, Exception | None], None], Callable[[str], None]]:
    """What the check calls with the step's requests (and the error the step raised after it
    asked for them), and with why it could not read them."""

    def failed(reason: str) -> None:
        _show_line(f"gradcheck: {reason}; {settings.what} goes on unchecked")

    def delivered(result: Any, failure: Exception | None) -> None:
        __tracebackhide__ = True  # DeadVariablesError points at the user's own line
        _delivered(result, failure, settings, failed)

    return delivered, failed


def _delivered(
    result: Any, failure: Exception | None, settings: _Settings, failed: Callable[[str], None]
) -> None:
    """The step's requests, as reports: shown, then training stopped or let go on. A step that
    failed after it asked for gradients (`failure`) is said to have, and its own error goes on
    after the report: nothing is left to stop."""
    __tracebackhide__ = True
    if failure is not None:  # its traceback follows the report: the type says which it is
        name = type(failure).__name__
        _show_line(f"gradcheck: {settings.what} raised {name} after it asked for gradients")
        goes_on = ""
    else:
        goes_on = f"; {settings.what} goes on"
    # TensorFlow sums a non-scalar target, as `gradcheck run` says.
    options = replace(settings.options, sum_loss=True)
    try:
        reports = run_reports(_program_name(), result, options)
    except GradcheckError as error:  # nothing to check (no trainable variable): the user's
        # training is not gradcheck's to break
        _cannot_check(f"cannot check this step: {error}", failure, failed)
        return
    except Exception as error:  # a gradcheck bug: one line, and the training goes on
        _cannot_check(f"internal error: {type(error).__name__}: {error}", failure, failed)
        return
    if settings.options.allow_dead:
        reports = [apply_policy(r, allow_dead=dict(settings.options.allow_dead)) for r in reports]
    dead = any(report.dead for report in reports)
    if not dead and not any(report.findings for report in reports):
        _show_line(f"gradcheck: no dead variables ({_counts(reports)}){goes_on}")
        return
    _show_report(reports)
    if failure is not None:
        return
    if dead and settings.on_dead == "stop":
        # Held by no local of this frame, which its traceback keeps: freed once caught.
        raise _one_line_if_uncaught(DeadVariablesError(reports))
    _show_line(f"gradcheck: {settings.what} goes on")


# How many DeadVariablesErrors were raised and not freed yet, and the excepthook that was there
# before the first of them was raised.
_unfreed_stops = [0]
_hook_before: list[Callable[..., Any]] = []


def _one_line_if_uncaught(stop: DeadVariablesError) -> DeadVariablesError:
    """If `stop` ends the program uncaught (a plain `python train.py`), Python shows one line
    after the report, with no traceback through gradcheck's hooks, and exits with code 1 as
    for any uncaught exception. Caught (`except DeadVariablesError`, pytest), it is a plain
    exception; the hook goes once no DeadVariablesError is left. IPython never calls
    sys.excepthook for a cell's error: it calls `_render_traceback_`."""
    if not _unfreed_stops[0]:
        _hook_before[:] = [sys.excepthook]
        sys.excepthook = _show_uncaught_stop
    _unfreed_stops[0] += 1
    weakref.finalize(stop, _unhook_when_none_left)
    return stop


def _show_uncaught_stop(kind: type[BaseException], error: BaseException, traceback: Any) -> None:
    if isinstance(error, DeadVariablesError):
        print(f"{kind.__name__}: {error}", file=sys.stderr, flush=True)
        return
    (_hook_before[0] if _hook_before else sys.__excepthook__)(kind, error, traceback)


def _unhook_when_none_left() -> None:
    _unfreed_stops[0] -= 1
    if not _unfreed_stops[0] and sys.excepthook is _show_uncaught_stop:
        sys.excepthook = _hook_before.pop() if _hook_before else sys.__excepthook__


def _cannot_check(reason: str, failure: Exception | None, failed: Callable[[str], None]) -> None:
    if failure is None:
        failed(reason)
    else:  # the step's own error follows: nothing goes on
        _show_line(f"gradcheck: {reason}")


def _program_name() -> str:
    """What the reports name as checked: the script, or the notebook (Jupyter tells its path)."""
    notebook = os.environ.get("JPY_SESSION_NAME")
    if _in_jupyter():
        return notebook or "<notebook>"
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return str(main) if main else "<this process>"


def _counts(reports: list[Report]) -> str:
    """The verdict's counts, as the terminal report ends: `2 ok, 0 blocked, ...`; per request
    when the step asked for gradients more than once."""
    counts = [verdict_parts(report)[1] for report in reports]
    if len(counts) == 1:
        return counts[0]
    return "; ".join(f"{report.source.loss}: {part}" for report, part in zip(reports, counts))


def _show_report(reports: list[Report]) -> None:
    checked = reports[0] if len(reports) == 1 else reports
    if _in_jupyter():
        from gradcheck_cli.reporters.html.page import html_fragment

        # The kernel's own IPython, which it has imported: gradcheck does not depend on it.
        shown = sys.modules["IPython.display"]

        # The page's body, its ids apart from those of every other report in the notebook
        # (one saved from an earlier kernel's run too); each cell named as IPython's
        # tracebacks name it.
        prefix = f"gradcheck-{uuid.uuid4().hex[:12]}-"
        page = html_fragment(reports, prefix, fix_command=_fix_command(), file_names=_cell_names())
        shown.display(shown.HTML(page))
        return
    terminal = sys.stderr.isatty()
    options = TerminalOptions(
        color=auto_color(sys.stderr),
        width=shutil.get_terminal_size().columns if terminal else None,
        fix_command=_fix_command(),
    )
    sys.stderr.write(render(checked, Format.TERMINAL, options))
    sys.stderr.flush()


def _fix_command() -> str:
    """What writes the report's verified fixes: `gradcheck run` with --fix on the program's
    script; none to offer for a notebook or an interactive session (--fix edits .py files)."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if _in_jupyter() or not main or not str(main).endswith(".py"):
        return ""
    from gradcheck_cli.errors import display_path

    return f"gradcheck run {shlex.quote(display_path(str(main)))} --fix"


def _cell_names() -> dict[str, str]:
    """The file name IPython gives each cell it ran -> `Cell In[3]`, as its own tracebacks name
    them (from the map its tracebacks read; empty where there is none)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    names = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if not isinstance(names, dict):
        return {}
    return {str(file): f"Cell In[{number}]" for file, number in names.items()}


def _show_line(line: str) -> None:
    if _in_jupyter():
        from rich.text import Text

        _jupyter_console().print(Text(line), soft_wrap=True)
        return
    print(line, file=sys.stderr, flush=True)


def _in_jupyter() -> bool:
    from rich.console import Console

    return bool(Console().is_jupyter)


def _jupyter_console() -> Any:
    from rich.console import Console

    # rich shows what it prints in Jupyter as the cell's rich (HTML) output.
    return Console(highlight=False, emoji=False)
