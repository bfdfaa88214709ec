"""A walk's trace counts its edges alike whether it keeps them or, past a bound, only counts."""

from __future__ import annotations

import random

from gradcheck_cli.analysis.walk_traces import Trace
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.flat_nodes import FlatNodes


def _nodes(count: int) -> FlatNodes:
    nodes = FlatNodes()
    for n in range(count):
        nodes.append(f"op_{n}", "Identity")
    return nodes.finish()


def test_a_trace_that_only_counts_finds_as_many_edges_as_one_that_keeps_them() -> None:
    nodes = _nodes(50)
    shuffled = random.Random(7)
    # Repeated edges (an op reading one producer twice, two outputs of one producer) count
    # once, and so does an edge first crossed freely and then at a cut.
    crossings = [(shuffled.randrange(-3, 50), shuffled.randrange(50)) for _ in range(400)]
    kept, counted = Trace(nodes), Trace(nodes, routed=False, counted_past=20)
    for k, (source, target) in enumerate(crossings):
        cut = Reason.STOP_GRADIENT if k % 7 == 0 else None
        kept.add(source, target, cut)
        counted.add(source, target, cut)
    assert counted.counted and not kept.counted
    assert len(counted) == len(kept) == len(set(crossings))
    assert len(kept) > 20


def test_a_trace_under_its_bound_keeps_its_edges_by_name() -> None:
    nodes = _nodes(3)
    trace = Trace(nodes, routed=False, counted_past=20)
    trace.add(0, 1, None)
    trace.add(1, 2, Reason.STOP_GRADIENT)
    trace.add(1, 2, None)  # the same edge again: it stays a cut
    outside = trace.number("not_in_the_body")
    trace.add(outside, 2, None)
    assert not trace.counted
    assert [(e.source, e.target, e.cut) for e in trace.edges()] == [
        ("op_0", "op_1", False),
        ("op_1", "op_2", True),
        ("not_in_the_body", "op_2", False),
    ]
