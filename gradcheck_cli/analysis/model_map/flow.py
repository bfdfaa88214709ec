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

    def nearest_onward(self, key: str) -> set[str]:
        """The nodes that data leaving `key` reaches through the fewest ops of no node (a
        residual stream reaches every later block; the next one first)."""
        return self._nearest(key, self.after)

    def nearest(self, key: str | None) -> set[str]:
        """The node `key` is, or the nodes nearest to it whose data reaches it."""
        if key is None:
            return set()
        if key in self.ids:
            return {self.ids[key]}
        return self._nearest(key, self.before)

    def _nearest(self, key: str, links: Mapping[str, list[str]]) -> set[str]:
        found: set[str] = set()
        layer, seen = [key], {key}
        while layer and not found:
            following = []
            for current in layer:
                for k in links.get(current, ()):
                    if k in self.ids:
                        found.add(self.ids[k])
                    elif k not in seen:
                        seen.add(k)
                        following.append(k)
            layer = following
        return found

    def _reach(
        self, key: str, links: Mapping[str, list[str]], done: dict[str, set[str]]
    ) -> set[str]:
        """The nodes one link from `key`, through keys of no node; each such key's answer kept
        in `done`. On a cycle, the key the search entered it by gets the whole answer; the
        others' answers, short of what lies back round the cycle, are not kept."""
        stack = [(key, False)]
        open_: set[str] = set()  # keys being answered
        short: set[str] = set()  # keys whose answer missed an open key's
        while stack:
            current, expanded = stack.pop()
            if current in done and not expanded:
                continue
            passing = [k for k in links.get(current, ()) if k not in self.ids]
            if not expanded:
                done[current] = set()
                open_.add(current)
                stack.append((current, True))
                stack.extend((k, False) for k in passing if k not in done)
                continue
            open_.discard(current)
            found = {self.ids[k] for k in links.get(current, ()) if k in self.ids}
            for k in passing:
                found |= done.get(k, set())
                if k in open_ or k in short:
                    short.add(current)
            done[current] = found
        for k in short - {key}:
            del done[k]
        return done[key]


def reduced(edges: set[tuple[str, str]], kept: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """`edges` without those a longer path implies (a residual stream reaches every later
    block, and through each block before it), taken out one at a time, so that every node
    still reaches what it reached, cycles too. Edges in `kept` (a cut sits on them) stay."""
    after: dict[str, set[str]] = {}
    for source, target in edges:
        after.setdefault(source, set()).add(target)
    for source, target in sorted(edges):
        if (source, target) in kept:
            continue
        after[source].discard(target)
        if not _reaches(after, source, target):
            after[source].add(target)
    return {(source, target) for source, targets in after.items() for target in targets}


def _reaches(after: Mapping[str, set[str]], source: str, target: str) -> bool:
    stack, seen = [source], {source}
    while stack:
        for onward in after.get(stack.pop(), ()):
            if onward == target:
                return True
            if onward not in seen:
                seen.add(onward)
                stack.append(onward)
    return False
