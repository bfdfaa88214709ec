"""The one error type for input that gradcheck cannot analyse (exit code 2)."""

from __future__ import annotations


class GradcheckError(Exception):
    """Bad input: a missing path, an unreadable model, a loss that cannot be found."""
