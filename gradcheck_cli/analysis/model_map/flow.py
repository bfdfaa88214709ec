"""The model map's edges: data followed through the ops that are no node's, to the nodes on
either side of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class Flow:
    """The walk's edges between nodes, each run of ops that data passes through (keys that
    are no node's) followed to the nodes on either side of it."""

    def __init__(self, edges: Iterable[tuple[str, str]], ids: Mapping[str, str]) -> None:
        self.ids = ids
        self.after: dict[str, list[str]] = {}
        self.before: dict[str, list[str]] = {}
        for source, target in edges:
            self.after.setdefault(source, []).append(target)
            self.before.setdefault(target, []).append(source)
        self._onward: dict[str, set[str]] = {}
        self._back: dict[str, set[str]] = {}

    def onward(self, key: str) -> set[str]:
        """The nodes that data leaving `key` reaches first."""
        return self._reach(key, self.after, self._onward)

    def nodes(self, key: str | None) -> set[str]:
        """The node `key` is, or the nodes whose data reaches it through ops of no node."""
        if key is None:
            return set()
        if key in self.ids:
            return {self.ids[key]}
        return self._reach(key, self.before, self._back)

    def _reach(
        self, key: str, links: Mapping[str, list[str]], done: dict[str, set[str]]
    ) -> set[str]:
        """The nodes one link from `key`, through keys of no node; each such key's answer kept
        in `done` (a cycle is cut where it closes)."""
        stack = [(key, False)]
        while stack:
            current, expanded = stack.pop()
            if current in done and not expanded:
                continue
            passing = [k for k in links.get(current, ()) if k not in self.ids]
            if not expanded:
                done[current] = set()  # in progress: a cycle back here adds nothing
                stack.append((current, True))
                stack.extend((k, False) for k in passing if k not in done)
                continue
            found = {self.ids[k] for k in links.get(current, ()) if k in self.ids}
            for k in passing:
                found |= done.get(k, set())
            done[current] = found
        return done[key]


def reduced(edges: set[tuple[str, str]], kept: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """`edges` without those a longer path implies (a residual stream reaches every later
    block, and through each block before it): the same nodes reach the same nodes. Edges in
    `kept` (a cut sits on them) stay."""
    after: dict[str, set[str]] = {}
    for source, target in edges:
        after.setdefault(source, set()).add(target)
    left = set()
    for source, target in edges:
        if (source, target) in kept or not _around(after, source, target):
            left.add((source, target))
    return left


def _around(after: Mapping[str, set[str]], source: str, target: str) -> bool:
    """Whether `target` is reached from `source` through another node."""
    stack = [node for node in after.get(source, ()) if node != target]
    seen = set(stack) | {source}
    while stack:
        node = stack.pop()
        for onward in after.get(node, ()):
            if onward == target:
                return True
            if onward not in seen:
                seen.add(onward)
                stack.append(onward)
    return False
