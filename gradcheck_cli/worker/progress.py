"""What the worker, or gradcheck itself, is doing, shown on stderr while it works.

The worker says each step (`say`) into a file that gradcheck names in its environment; gradcheck
reads it while it waits for the worker and shows it with a spinner (`Status`). On anything but
a terminal, and when the options do not ask for it, nothing is shown and nothing is written.

A check gradcheck runs in its own process (a SavedModel) hears its steps as they happen
(`Steps`): a spinner on a terminal, and in a log a plain line every few seconds.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from gradcheck_cli.errors import GradcheckError

PROGRESS_FILE_VARIABLE = "GRADCHECK_PROGRESS_FILE"
PROGRESS_SECONDS_VARIABLE = "GRADCHECK_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 5.0


def say(step: str) -> None:
    """In the worker: `step` (`tracing loss...`) is what it does now, if gradcheck listens."""
    target = os.environ.get(PROGRESS_FILE_VARIABLE)
    if not target:
        return
    path = Path(target)
    partial = path.with_suffix(".partial")
    try:
        partial.write_text(step, encoding="utf-8")
        partial.replace(path)  # whole, so gradcheck never reads half a step
    except OSError:
        pass  # a status line is not worth failing the check for


class Status:
    """In gradcheck: a spinner on stderr with the worker's current step, while it works.

    `enabled` False (the options), or stderr not a terminal: does nothing at all. `console`:
    where to show it (a rich Console; None: a new one on stderr).
    """

    def __init__(self, enabled: bool, first_step: str, folder: Path, console: Any = None) -> None:
        self.path = folder / "progress"
        self._step = first_step
        self._status: Any = None
        self._spinner: Any = None
        self._console = console
        # Not rich's own test: it counts FORCE_COLOR as a terminal, and CI logs set that.
        terminal = console.is_terminal if console is not None else _stderr_is_a_terminal()
        self.enabled = enabled and terminal

    def environment(self) -> dict[str, str]:
        """What the worker's environment needs to say its steps."""
        return {PROGRESS_FILE_VARIABLE: str(self.path)} if self.enabled else {}

    def __enter__(self) -> Status:
        if self.enabled:
            from rich.console import Console

            # The worker's output relayed meanwhile goes through sys.stderr, which the status
            # takes over, so each line prints above the spinner instead of through it.
            from rich.live import Live
            from rich.spinner import Spinner

            console = self._console or Console(stderr=True, highlight=False, emoji=False)
            self._spinner = Spinner("dots", text=self._step)
            self._status = Live(
                self._spinner, console=console, transient=True, refresh_per_second=12.5
            )
            self._status.start()
        return self

    def poll(self) -> None:
        """Show the worker's latest step, if it said a new one."""
        if self._status is None:
            return
        try:
            step = self.path.read_text(encoding="utf-8")
        except OSError:
            return
        if step and step != self._step:
            self._step = step
            self._spinner.update(text=step)
            # Drawn now, not at the next tick: a step shorter than a tick still shows.
            self._status.refresh()

    def stop(self) -> None:
        """Take the status line away (before a report is written while the worker goes on)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _stderr_is_a_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by something that is not a file, or closed
        return False


class Steps:
    """In gradcheck: the steps of a check it runs in its own process, shown on stderr.

    Called as a `graph.progress.Progress` (`steps("building the graph model", "12 functions")`).
    On a terminal, a spinner with the step, as `Status` shows the worker's; each new step is
    drawn at once, a new detail at the spinner's next frame. Elsewhere (a CI log), once the
    check has taken `seconds`, a plain line every `seconds` with the step it is at: a quick check
    prints nothing. `enabled` False (the options: `-q`, models checked side by side): nothing.
    `seconds` None: GRADCHECK_PROGRESS_SECONDS, else DEFAULT_PROGRESS_SECONDS.
    """

    def __init__(self, enabled: bool, seconds: float | None = None, console: Any = None) -> None:
        self.enabled = enabled
        self.seconds = _progress_seconds() if seconds is None and enabled else seconds
        self._console = console
        self._now = ("", "")  # (step, detail), one value: the drawing thread reads it whole
        self._live: Any = None
        self._stream: TextIO | None = None
        self._done = threading.Event()
        self._teller: threading.Thread | None = None
        self._started = 0.0

    def __call__(self, step: str, detail: str = "") -> None:
        new = step != self._now[0]
        self._now = (step, detail)
        if new and self._live is not None:
            self._live.refresh()  # drawn now, not at the next frame: a short step still shows

    def line(self) -> str:
        """The step under way, as shown: "building the graph model (3 functions, 40 nodes)"."""
        step, detail = self._now
        return f"{step} ({detail})" if detail else step

    def __enter__(self) -> Steps:
        if not self.enabled:
            return self
        self._started = self._started or time.monotonic()  # one clock for a check's steps
        terminal = (
            self._console.is_terminal if self._console is not None else _stderr_is_a_terminal()
        )
        if terminal:
            from rich.console import Console
            from rich.live import Live

            self._console = self._console or Console(stderr=True, highlight=False, emoji=False)
            self._live = Live(
                _Spinning(self), console=self._console, transient=True, refresh_per_second=12.5
            )
            self._live.start()
        else:
            self._stream = sys.stderr
            self._done.clear()
            self._teller = threading.Thread(target=self._tell, name="gradcheck-steps", daemon=True)
            self._teller.start()
        return self

    @contextlib.contextmanager
    def aside(self) -> Iterator[None]:
        """For a step a worker takes (`--verify`): on a terminal, the worker's own status line
        shows meanwhile, so this one is taken away and back; in a log, it goes on."""
        if self._live is None:
            yield
            return
        self._live.stop()
        self._live = None
        try:
            yield
        finally:
            self.__enter__()

    def _tell(self) -> None:
        assert self._stream is not None and self.seconds is not None
        while not self._done.wait(self.seconds):
            if not self._now[0]:
                continue
            elapsed = time.monotonic() - self._started
            try:
                self._stream.write(f"gradcheck: {self.line()}... ({elapsed:.0f} s)\n")
                self._stream.flush()
            except (OSError, ValueError):  # stderr closed: a progress line is not worth more
                return

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._teller is not None:
            self._done.set()
            self._teller.join()
            self._teller = None


class _Spinning:
    """The spinner `Steps` shows, its text read from the steps at each frame: a step costs its
    caller two assignments, never a rendering."""

    def __init__(self, steps: Steps) -> None:
        from rich.spinner import Spinner

        self._steps = steps
        self._spinner = Spinner("dots")

    def __rich__(self) -> Any:
        from rich.text import Text

        self._spinner.text = Text(f"{self._steps.line()}...")
        return self._spinner


def _progress_seconds() -> float:
    """GRADCHECK_PROGRESS_SECONDS (seconds between two lines in a log), else the default."""
    text = os.environ.get(PROGRESS_SECONDS_VARIABLE, "").strip()
    if not text:
        return DEFAULT_PROGRESS_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise GradcheckError(
            f"{PROGRESS_SECONDS_VARIABLE}={text!r}: the seconds between two progress lines must "
            "be a number more than 0 and at most 3600"
        )
    return seconds
