"""The library entry points that the CLI, the pytest integration and users call."""

from __future__ import annotations

import os
from typing import Any

from gradcheck_cli.findings.report import Report


def check(model: str | os.PathLike[str], loss: str | None = None, *, verify: bool = False) -> Report:
    """Analyse a SavedModel directory or a Python script and return the report.

    Raises GradcheckError when the input cannot be analysed.
    """
    raise NotImplementedError


def check_function(
    function: Any,
    *,
    variables: Any = None,
    verify: bool = False,
) -> Report:
    """Analyse a live `tf.function` (or concrete function) in this process.

    `variables`: extra candidate variables (e.g. every variable of a model); the variables the
    function captures are always candidates. The function must take no arguments or have an
    `input_signature`.
    """
    raise NotImplementedError
