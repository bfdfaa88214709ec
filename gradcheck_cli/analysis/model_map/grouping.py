"""Which of the model map's nodes each name scope belongs to: scopes cut to the depth that keeps
the map within its budget, and sibling blocks of one structure folded into one node.

A scope's levels are its name's parts, split at each `/` and at each `_` that starts a new
word: `resnet50_1/conv2_block1_1_conv_1` has the levels `resnet50_1`, `resnet50_1/conv2`,
`resnet50_1/conv2_block1`, `resnet50_1/conv2_block1_1` and the whole. A model whose layers sit
side by side under flat names (every Keras functional model's do) is grouped by the words its
names share, as its author wrote them; a `_` before a final number (`dense_1`, `layer_0`: one
layer's name, made unique) does not split.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

_BREAK = re.compile(r"/|(?<=[^/_])_(?!\d+(?:_\d+)*(?:/|$))")
NUMBERED = re.compile(r"_?\d+$")
_NUMBERS = re.compile(r"(?:_?\d+)(?:_\d+)*$")  # a name's last numbers: `_0_1` in `layer_0_1`
_SUFFIXES = re.compile(r"(?:_\d+)+(?=/|$)")  # numbers that make a layer's name unique


class Held(Protocol):
    """A variable as grouping sees it: the last part of its name and its colour."""

    name: str
    status: object


@dataclass(frozen=True)
class Group:
    """A scope's node: its label, and the block of a folded run the scope lies in (the label
    itself when not folded)."""

    label: str
    block: str


def levels(scope: str) -> list[int]:
    """Where each of the scope's levels ends in its name."""
    return [match.start() for match in _BREAK.finditer(scope)] + [len(scope)]


def _parts(scope: str) -> list[list[int]]:
    """Per part of the scope's name between two `/`, where each of its levels ends."""
    parts: list[list[int]] = [[]]
    for match in _BREAK.finditer(scope):
        parts[-1].append(match.start())
        if match.group() == "/":
            parts.append([])
    parts[-1].append(len(scope))
    return parts


def group_scopes(
    scopes: list[str],
    types: Mapping[str, Counter[str]],
    held: Mapping[str, Iterable[Held]],
    keep: set[str],
    budget: int,
    links: Iterable[tuple[str, str]] = (),
) -> tuple[int, dict[str, Group]]:
    """The deepest cut whose nodes, repeated blocks folded, fit `budget`, and each scope's group
    there; with the number of `/` parts it keeps. Cuts go part by part: the words of a scope's
    second part (`conv2_block1`) split before its third part (`bn/moments`) does. A group that
    holds no variable and no cut joins the group its scope lies under, if there is one (a batch
    norm's `moments` stays in the layer). Scopes in `keep` (those holding a cut) are never
    folded."""
    folds = _folds(scopes, types, held, keep, list(links))
    parts = {scope: _parts(scope) for scope in scopes}
    words: Counter[int] = Counter()  # per part, the most levels any scope has in it
    for cut in parts.values():
        for number, part in enumerate(cut, 1):
            words[number] = max(words[number], len(part))
    targets = [(part, word) for part in sorted(words) for word in range(1, words[part] + 1)]
    best = 1, _groups(parts, folds, (1, 1))
    for target in targets[1:]:
        group_of = _groups(parts, folds, target)
        if len({group.label for group in group_of.values()}) > budget:
            break
        best = target[0], group_of
    depth, group_of = best
    telling = {group_of[scope].label for scope in scopes if scope in keep or held.get(scope)}
    labels = {group.label: group for group in group_of.values()}
    # A layer: a telling group with no other telling group under it (a batch norm, not the
    # model whose layers these are).
    crowded = {above for label in telling for above in ancestors(label)}
    layers = telling - crowded
    for scope, group in group_of.items():
        if group.label not in telling:
            above = next((a for a in ancestors(group.label) if a in labels), None)
            if above in layers:
                group_of[scope] = labels[above]
    return depth, group_of


def ancestors(label: str) -> list[str]:
    """The scopes `label` lies under, nearest first (`a/b/c`: `a/b`, `a`)."""
    above = []
    while "/" in label:
        label = label.rpartition("/")[0]
        above.append(label)
    return above


def _groups(
    parts: Mapping[str, list[list[int]]], folds: Mapping[str, Group], target: tuple[int, int]
) -> dict[str, Group]:
    """Per scope, its group at `target` (its first parts, and levels of the last part): the run
    of blocks it lies in, if folded there or above, else its name cut there."""
    part, word = target
    group_of = {}
    for scope, cut in parts.items():
        if part > len(cut):
            end = len(scope)
        else:
            ends = cut[part - 1]
            end = ends[min(word, len(ends)) - 1]
        group = folds.get(scope)
        if group is None or len(group.block) > end:
            group = Group(scope[:end], scope[:end])
        group_of[scope] = group
    return group_of


def _folds(
    scopes: list[str],
    types: Mapping[str, Counter[str]],
    held: Mapping[str, Iterable[Held]],
    keep: set[str],
    links: list[tuple[str, str]],
) -> dict[str, Group]:
    """Per scope inside a run of sibling blocks of one structure (the same ops and variables
    under the same sub-scopes, with the same verdicts, none kept: `layer_0` ... `layer_11`),
    each fed by the one before it with nothing between them (`links`: data flowing from scope
    to scope; two stages' downsampling blocks, the stage between them, never fold), its group
    (`encoder/layer_0…11`); outer runs first."""
    folds: dict[str, Group] = {}
    ends = {scope: levels(scope) for scope in scopes}
    deepest = max((len(cut) for cut in ends.values()), default=1)
    for level in range(1, deepest + 1):
        shapes: dict[str, set[tuple[object, ...]]] = {}
        parents: dict[str, tuple[str, str]] = {}
        for scope in scopes:
            cut = ends[scope]
            if scope in folds or len(cut) < level:
                continue
            block = scope[: cut[level - 1]]
            if block not in parents:  # the parent with its separator, and the block's own part
                start = cut[level - 2] + 1 if level > 1 else 0
                parents[block] = scope[:start], block[start:]
            # Inside, names compare without the numbers that make them unique: the second
            # block's `dropout_1` is the first one's `dropout`, its `variable_7` the `variable_6`.
            inside = _SUFFIXES.sub("", scope[len(block) :])
            shape = shapes.setdefault(block, set())
            shape.update((inside, op, count) for op, count in types.get(scope, {}).items())
            for variable in held.get(scope, ()):
                leaf = _SUFFIXES.sub("", variable.name.rpartition("/")[2])
                shape.add((inside, leaf, variable.status))
            if scope in keep:
                shape.add(("kept", block))  # a block with a cut stays its own node
        fed: dict[str, set[str]] = {}  # block -> the blocks it feeds, at this level
        for source, target in links:
            if len(ends.get(source, ())) >= level and len(ends.get(target, ())) >= level:
                block = source[: ends[source][level - 1]]
                fed.setdefault(block, set()).add(target[: ends[target][level - 1]])
        siblings: dict[tuple[str, ...], list[tuple[int, str]]] = {}
        for block in shapes:
            parent, last = parents[block]
            numbers = _NUMBERS.search(last)
            if numbers is not None:  # `layer_0_1`: block 0 (of a run of `layer_*_1`)
                first, _, rest = numbers.group().lstrip("_").partition("_")
                key = parent, last[: numbers.start()], rest
                siblings.setdefault(key, []).append((int(first), block))
        pattern = {}
        for (parent, _, _), numbered in siblings.items():
            for run in _runs(sorted(numbered), shapes, fed):
                label = parent + _run_label(run[0][1][len(parent) :], run[-1][0])
                pattern.update((block, label) for _, block in run)
        for scope in scopes:
            cut = ends[scope]
            block = scope[: cut[level - 1]] if len(cut) >= level else None
            if block in pattern and scope not in folds:
                folds[scope] = Group(pattern[block], block)
    return folds


def _runs(
    numbered: list[tuple[int, str]],
    shapes: Mapping[str, set[tuple[object, ...]]],
    fed: Mapping[str, set[str]],
) -> list[list[tuple[int, str]]]:
    """The runs of two or more blocks numbered one after another with one shape, each fed by
    the one before it."""
    runs: list[list[tuple[int, str]]] = []
    run: list[tuple[int, str]] = []
    for number, block in numbered:
        previous = run[-1] if run else None
        if previous is not None and (
            number != previous[0] + 1
            or shapes[block] != shapes[previous[1]]
            or not _next_to(previous[1], block, fed)
        ):
            runs.append(run)
            run = []
        run.append((number, block))
    runs.append(run)
    return [run for run in runs if len(run) > 1]


def _next_to(first: str, second: str, fed: Mapping[str, set[str]]) -> bool:
    """Whether `first` feeds `second` and no other block is fed by one and feeds the other."""
    after = fed.get(first, set())
    if second not in after:
        return False
    return not any(second in fed.get(between, ()) for between in after - {first, second})


def _run_label(first: str, last: int) -> str:
    """`layer_0…11` for the run of blocks from `layer_0` to number 11."""
    numbers = _NUMBERS.search(first)
    assert numbers is not None
    digits = numbers.group().lstrip("_").partition("_")[0]
    end = numbers.end() - len(numbers.group()) + numbers.group().index(digits) + len(digits)
    return f"{first[:end]}…{last}{first[end:]}"
