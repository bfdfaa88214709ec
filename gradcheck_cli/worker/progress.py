"""What the worker is doing, shown as a status line on a terminal's stderr while it works.

The worker says each step (`say`) into a file that gradcheck names in its environment; gradcheck
reads it while it waits for the worker and shows it with a spinner (`Status`). On anything but
a terminal, and when the options do not ask for it, nothing is shown and nothing is written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

PROGRESS_FILE_VARIABLE = "GRADCHECK_PROGRESS_FILE"


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
