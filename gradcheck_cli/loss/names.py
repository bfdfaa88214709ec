"""Pick the loss the user named among a model's candidates, or the only loss-like one."""

from __future__ import annotations

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
        keyed = keyed_matches(loss, candidates)
        if len(keyed) == 1:
            return keyed[0]
        if keyed:
            raise ambiguous_name(loss, keyed, "outputs", what=what)
        import difflib  # only for a loss that is not there

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


def keyed_matches(loss: str, candidates: Mapping[str, object]) -> list[str]:
    """Candidates `SIGNATURE:KEY` whose KEY is the plain name `loss`, one per distinct target.

    Two signatures often return the same tensor under the same key: that is one loss, not a
    choice to make.
    """
    if ":" in loss:
        return []
    matches: list[str] = []
    for name in sorted(candidates):
        prefix, colon, key = name.rpartition(":")
        if colon and prefix and key == loss:
            if all(candidates[name] != candidates[kept] for kept in matches):
                matches.append(name)
    return matches


def ambiguous_name(loss: str, matches: list[str], kind: str, *, what: str) -> GradcheckError:
    """The error for a plain `--loss` name that several `kind` ("outputs", "tensors") match."""
    return GradcheckError(
        f"{loss!r} names {len(matches)} {kind} in {what}; choose one with --loss: "
        f"{_listing(matches)}"
    )


def _listing(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:12])
    return shown + (f" and {len(names) - 12} more" if len(names) > 12 else "")
