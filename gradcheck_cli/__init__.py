"""gradcheck: find the TensorFlow trainable variables that a loss can never train."""

from __future__ import annotations

from gradcheck_cli.api import assert_no_dead_variables, check, check_function
from gradcheck_cli.errors import GradcheckError

__all__ = ["GradcheckError", "assert_no_dead_variables", "check", "check_function"]
__version__ = "0.1.0"
