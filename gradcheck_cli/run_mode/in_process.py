"""`gradcheck run`'s hooks in the user's own process (watch(), the Keras callback), then gone."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from gradcheck_cli.run_mode.capture import Capture, CaptureFailed
from gradcheck_cli.tracing.override_maps import recording_override_maps
from gradcheck_cli.worker.protocol import RunResult

# The checks installed now: a new one removes those left behind (a cell run again, a `fit`
# that failed before its first step), so hooks never stack.
_installed: list[InProcessCheck] = []


# Gets the step's requests, and the error the step raised after it asked for them (None when
# it came to its first weight change, or ended).
Deliver = Callable[[RunResult, "Exception | None"], None]


class InProcessCheck:
    """The hooks of `gradcheck run`, in this process. `deliver` gets the requests just before
    the first weight change, once every hook is removed; the program then goes on, unless
    `deliver` raises (the exception reaches the program's code before the weight changes).
    A step that raises after it asked for gradients, before any weight changed (Keras's "No
    gradients provided for any variable"), is delivered with its error, which then goes on
    (run mode's runner sees the script's error itself)."""

    def __init__(self, deliver: Deliver, failed: Callable[[str], None]) -> None:
        """`failed` gets the one line that says why a request could not be read; the program
        goes on, unchecked."""
        self._deliver = deliver
        self._failed = failed
        self._failure: Exception | None = None
        self._capture = Capture(
            self._delivered,
            run_on=True,
            failed=self._could_not_read,
            around_failures=self._report_before_error,
        )
        self._override_maps = contextlib.ExitStack()
        self._uncaught = contextlib.ExitStack()

    @property
    def asked(self) -> bool:
        """Whether the program asked for gradients (of a variable) since the install."""
        return bool(self._capture.requests)

    @property
    def delivered(self) -> bool:
        return self._capture.delivered

    def install(self, model: Any = None) -> None:
        """Install every hook; `model`: a Keras model built already, whose weights are then
        named by their layers as if its building had been watched. Under `gradcheck run`,
        nothing: the run checks the step itself."""
        if under_gradcheck_run():
            return
        for other in list(_installed):
            other.uninstall()
        self._capture.track_variables()
        if model is not None:
            self._capture.created.keras.add_model(model)
        self._capture.install()
        self._override_maps.enter_context(recording_override_maps())
        self._uncaught.enter_context(_reporting_uncaught_errors(self._uncaught_error))
        _installed.append(self)

    def finish(self, failure: Exception | None = None) -> None:
        """Deliver the requests seen so far, if not yet (a block or a fit that ended before any
        weight changed; `failure`: the error it ended with), and remove every hook."""
        __tracebackhide__ = True
        if self.asked and not self.delivered:
            self._failure = failure
            self._capture.finish()
        self.uninstall()

    def uninstall(self) -> None:
        self._capture.uninstall()
        self._override_maps.close()
        self._uncaught.close()
        if self in _installed:
            _installed.remove(self)

    def _could_not_read(self, failure: CaptureFailed) -> None:
        self.uninstall()
        cause = failure.__cause__ or failure
        self._failed(f"could not read the gradient request: {type(cause).__name__}: {cause}")

    def _delivered(self, result: RunResult) -> None:
        __tracebackhide__ = True
        self.uninstall()  # the capture removed its own hooks already
        self._deliver(result, self._failure)

    def _uncaught_error(self, error: BaseException) -> None:
        """An error the program did not catch, that ends it (or a notebook cell) after it asked
        for gradients (a step that fails on the None gradients before any optimizer sees them,
        with watch() called without a `with` block): the report comes first."""
        if isinstance(error, Exception) and self.asked and not self.delivered:
            try:
                self.finish(error)
            except Exception as failure:  # its own error is the one the user must see
                self.uninstall()
                sys.stderr.write(f"gradcheck: internal error: {type(failure).__name__}\n")

    def _report_before_error(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        """`original(...)`; if it raises after the step asked for gradients and before they
        were delivered, they are delivered first, then the error goes on unchanged."""
        __tracebackhide__ = True
        try:
            return original(*args, **kwargs)
        except Exception as error:
            if self.asked and not self.delivered:
                from tensorflow.python.framework import ops

                with ops.init_scope():  # raised while tracing: checked outside that graph
                    self.finish(error)
            raise


@contextlib.contextmanager
def _reporting_uncaught_errors(report: Callable[[BaseException], None]) -> Iterator[None]:
    """`report(error)` for an error that reaches the top of the program (sys.excepthook) or of a
    notebook cell (IPython's custom exception handler), before its traceback is shown; both
    handlers are put back as they were on exit."""
    previous_hook = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, traceback: Any) -> None:
        report(error)
        previous_hook(kind, error, traceback)

    sys.excepthook = hook
    shell = _ipython()
    custom = (shell.custom_exceptions, shell.CustomTB) if shell is not None else None
    if shell is not None and not shell.custom_exceptions:  # never one the user set

        def handler(
            shell: Any, kind: type, error: BaseException, tb: Any, tb_offset: Any = None
        ) -> None:
            # IPython calls it where it would show the traceback, and shows nothing itself.
            report(error)
            shell.showtraceback((kind, error, tb), tb_offset=tb_offset)

        shell.set_custom_exc((Exception,), handler)
    try:
        yield
    finally:
        if sys.excepthook is hook:
            sys.excepthook = previous_hook
        if shell is not None and custom is not None:
            shell.custom_exceptions, shell.CustomTB = custom


def _ipython() -> Any:
    """The running IPython shell (a notebook's kernel), if any, without importing IPython."""
    module = sys.modules.get("IPython")
    get = getattr(module, "get_ipython", None)
    return get() if get is not None else None


def under_gradcheck_run() -> bool:
    """Whether this process is `gradcheck run`'s worker, which checks the step itself."""
    runner = sys.modules.get("gradcheck_cli.run_mode.runner")
    return bool(runner is not None and runner.running)


def keras_callback_class() -> type:
    """The Keras `Callback` class of the Keras this program trains with: Keras 2 (`tf_keras`)
    when TF_USE_LEGACY_KERAS asks for it or it is the only one imported, else Keras 3."""
    legacy = os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")
    if legacy or ("tf_keras" in sys.modules and "keras" not in sys.modules):
        import tf_keras

        return tf_keras.callbacks.Callback  # type: ignore[no-any-return]
    import keras

    return keras.callbacks.Callback  # type: ignore[no-any-return]
