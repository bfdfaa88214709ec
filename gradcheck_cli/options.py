"""How to check one model: the one options value every entry point and the worker carry."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckOptions:
    """Everything that shapes the check of one model, declared once.

    The CLI, the configuration, the Python API, the pytest plugin and the worker request all
    carry this value; adding an option means adding a field here.
    """

    loss: str | None = None  # None: the single loss-like candidate
    verify: bool = False  # also ask TensorFlow for its own gradients and compare
    all_cuts: bool = False  # also name the cuts on other paths of live variables (GC204)
    unsafe_deserialization: bool = False  # let Keras run Python code stored in a .keras file
    sum_loss: bool = False  # check the sum of a loss that is not a scalar
    timeout: float | None = None  # seconds a script or Keras file may take; None: the default
    # (variable-name glob, reason): dead variables accepted on purpose; the reason may be empty.
    allow_dead: tuple[tuple[str, str], ...] = ()
    debug: bool = False  # tracebacks and TensorFlow's start-up log, in the worker too
