"""gradcheck: find the TensorFlow trainable variables that a loss can never train.

The public names are imported when first used (PEP 562): the command line, which imports this
package first, loads only the modules its check needs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.version import __version__

if TYPE_CHECKING:
    from gradcheck_cli.api import (
        assert_no_dead_variables,
        check,
        check_function,
        check_script_run,
    )
    from gradcheck_cli.watching import DeadVariablesError, keras_callback, watch

# Each lazily imported public name, and the module that defines it.
_LAZY = {
    "assert_no_dead_variables": "gradcheck_cli.api",
    "check": "gradcheck_cli.api",
    "check_function": "gradcheck_cli.api",
    "check_script_run": "gradcheck_cli.api",
    "DeadVariablesError": "gradcheck_cli.watching",
    "keras_callback": "gradcheck_cli.watching",
    "watch": "gradcheck_cli.watching",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gradcheck_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
