"""Pick the loss the user named among a model's candidates, or the only loss-like one."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from gradcheck_cli.errors import GradcheckError

NOT_LOSS_NAMES = frozenset(
    {
        "main",
        "build_model",
        "build",
        "train",
        "run",
        "fit",
        "evaluate",
        "make_model",
        "create_model",
        "get_model",
        "model_fn",
    }
)
NOT_LOSS_PREFIXES = ("build_", "make_", "create_", "get_", "train", "load_", "setup", "parse")
"""Names of training, building and setup code: never called to see whether it is a loss."""


def looks_like_loss(name: str) -> bool:
    last = _last_part(name).lower()
    return "loss" in last or "objective" in last


def looks_like_setup(name: str) -> bool:
    """A name such as `main`, `build_model` or `train_step`, unless it also looks like a loss."""
    last = _last_part(name).lower()
    if looks_like_loss(last):
        return False
    return last in NOT_LOSS_NAMES or last.startswith(NOT_LOSS_PREFIXES)


def _last_part(name: str) -> str:
    return name.replace(":", ".").replace("/", ".").split(".")[-1]


def resolve_loss_name(loss: str | None, candidates: Mapping[str, object], *, what: str) -> str:
    """The candidate key for `loss`; with no `loss`, the single loss-like candidate."""
    names = sorted(candidates)
    if loss is not None:
        if loss in candidates:
            return loss
        close = difflib.get_close_matches(loss, names, n=3, cutoff=0.5)
        if close:
            raise GradcheckError(
                f"no loss named {loss!r} in {what}; did you mean {_listing(close)}?"
            )
        raise GradcheckError(
            f"no loss named {loss!r} in {what}; candidates: {_listing(names) or 'none'}"
        )
    loss_like = [name for name in names if looks_like_loss(name)]
    if len(loss_like) == 1:
        return loss_like[0]
    if not loss_like and len(names) == 1:
        return names[0]
    if not names:
        raise GradcheckError(f"{what} has no function or tensor that could be a loss")
    choices = loss_like or names
    raise GradcheckError(
        f"{what} has {len(choices)} candidate losses; choose one with --loss: {_listing(choices)}"
    )


def _listing(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:12])
    return shown + (f" and {len(names) - 12} more" if len(names) > 12 else "")
