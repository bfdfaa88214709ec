"""gradcheck: find the TensorFlow trainable variables that a loss can never train."""

from __future__ import annotations

from gradcheck_cli.api import (
    assert_no_dead_variables,
    check,
    check_function,
    check_script_run,
)
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.version import __version__
from gradcheck_cli.watching import DeadVariablesError, keras_callback, watch

__all__ = [
    "DeadVariablesError",
    "GradcheckError",
    "__version__",
    "assert_no_dead_variables",
    "check",
    "check_function",
    "check_script_run",
    "keras_callback",
    "watch",
]
