"""How the stages that read, build and analyse a graph say how far they are: one callback.

The stages below the pipeline cannot show anything themselves (the analysis may not even know
who called it), so they take a `Progress` and call it at each step; the pipeline passes one that
shows it (`worker.progress.Steps`), everyone else the default, `silent`.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, step: str, detail: str = "") -> None:
        """`step` ("building the graph model") began, or is `detail` ("12 functions") far."""


def silent(step: str, detail: str = "") -> None:
    """Progress nobody watches."""


NODES_PER_REPORT = 4096
"""Nodes a loop converts or walks between two reports of its count: a report costs a string,
a node only the counter's check."""


class BuiltCount:
    """The functions and nodes a builder has converted into the graph model, told to a
    `Progress` as "building the graph model" ("12 functions, 3,400 nodes")."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self.functions = 0
        self.nodes = 0

    def body_done(self, nodes: int) -> None:
        """A function's body of `nodes` nodes is built."""
        self.functions += 1
        self.nodes += nodes
        self.tell()

    def tell(self, under_way: int = 0) -> None:
        """Tell the counts, with `under_way` nodes of the body being built."""
        plural = "s" if self.functions != 1 else ""
        self._progress(
            BUILDING, f"{self.functions:,} function{plural}, {self.nodes + under_way:,} nodes"
        )


BUILDING = "building the graph model"
