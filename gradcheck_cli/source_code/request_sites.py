"""The gradient requests a user's source holds that a run did not reach. A run goes on past its
first weight change while the script holds request calls it has not reached yet (a GAN's
generator step after its critic's update), until each is reached or the loop comes around; a
request still not reached then (a branch not taken, a later phase) is one the check never saw,
and what it would train is not known."""

from __future__ import annotations

import ast
import linecache
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.debug_info import is_user_file
from gradcheck_cli.source_code.files import python_source

# The methods whose call asks TensorFlow for gradients: `tape.gradient`, `tf.gradients`,
# `optimizer.minimize`, Keras `fit` and `train_on_batch`.
REQUEST_METHODS = frozenset({"gradient", "gradients", "minimize", "fit", "train_on_batch"})


def request_spans(text: str) -> list[tuple[int, int]]:
    """The (first, last) lines of each call of a REQUEST_METHODS method in `text`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in REQUEST_METHODS
    ]


def unreached_requests(reached: Sequence[SourceLocation | None]) -> tuple[SourceLocation, ...]:
    """The request calls, in the user files that hold the `reached` requests or their callers,
    that none of them is (the calls a run stopped before)."""
    seen: dict[str, set[int]] = {}
    for location in _with_callers(reached):
        if is_user_file(location.file):
            seen.setdefault(location.file, set()).add(location.line)
    unreached = []
    for file, lines in seen.items():
        text = _text(file)
        for first, last in request_spans(text) if text else ():
            if not any(first <= line <= last for line in lines):
                unreached.append(SourceLocation(file, first))
    return tuple(sorted(set(unreached), key=lambda location: (location.file, location.line)))


@dataclass
class StepProgress:
    """How far a run's step got: a run goes on past a weight change while the script holds
    request calls it has not reached yet (a GAN's generator step after its critic's update, in
    another tf.function or eagerly), up to the weight change where every call is reached or
    the loop came around (what changes weights changes them again)."""

    changed: set[Hashable] = field(default_factory=set)  # what changed weights since the first
    _found: tuple[int, tuple[SourceLocation, ...]] = (-1, ())

    def unreached(self, reached: Sequence[SourceLocation | None]) -> tuple[SourceLocation, ...]:
        """`unreached_requests(reached)`, read again only when a new request was reached."""
        if self._found[0] != len(reached):
            self._found = (len(reached), unreached_requests(reached))
        return self._found[1]

    def whole(self, reached: Sequence[SourceLocation | None], changing: Hashable) -> bool:
        """Whether the step is whole before `changing` changes weights: every request call
        reached, or `changing` changed them once already in this step."""
        if not self.unreached(reached) or changing in self.changed:
            return True
        self.changed.add(changing)
        return False


def _with_callers(reached: Iterable[SourceLocation | None]) -> Iterable[SourceLocation]:
    for location in reached:
        if location is not None:
            yield location
            yield from location.callers


def _text(file: str) -> str | None:
    """A .py file's bounded text; a notebook cell's (or an interactive one's) as its runner left
    it in linecache (never read from disk by linecache: it bounds nothing)."""
    if file.endswith(".py"):
        return python_source(file)
    entry = linecache.cache.get(file)
    return "".join(entry[2]) if entry is not None and len(entry) > 2 else None
