"""The model map's edges: data followed through ops of no node, edges a longer path implies
left out, and names split into levels."""

from __future__ import annotations

from gradcheck_cli.analysis.model_map.flow import Flow, reduced
from gradcheck_cli.analysis.model_map.grouping import levels


def _reach(edges: set[tuple[str, str]]) -> dict[str, set[str]]:
    after: dict[str, set[str]] = {}
    for source, target in edges:
        after.setdefault(source, set()).add(target)
    reached = {}
    for node in {n for edge in edges for n in edge}:
        stack, seen = [node], set()
        while stack:
            for onward in after.get(stack.pop(), ()):
                if onward not in seen:
                    seen.add(onward)
                    stack.append(onward)
        reached[node] = seen
    return reached


def test_leaving_out_implied_edges_keeps_what_each_node_reaches_cycles_too() -> None:
    for edges in (
        {("x", "A"), ("x", "B"), ("A", "B"), ("B", "A"), ("A", "loss")},
        {("a", "b"), ("b", "c"), ("a", "c"), ("c", "a")},
        {("a", "b"), ("b", "c"), ("c", "d"), ("a", "c"), ("a", "d"), ("b", "d")},
    ):
        left = reduced(edges, set())
        assert left <= edges and _reach(left) == _reach(edges), (edges, left)
    assert reduced({("a", "b"), ("b", "c"), ("a", "c")}, set()) == {("a", "b"), ("b", "c")}
    assert ("a", "c") in reduced({("a", "b"), ("b", "c"), ("a", "c")}, {("a", "c")})


def test_data_followed_round_a_cycle_of_passed_ops_reaches_the_same_nodes_asked_in_any_order() -> (
    None
):
    edges = {("X", "S"), ("S", "R"), ("R", "S"), ("R", "C")}
    ids = {"X": "X", "C": "C"}
    for order in (["X", "R", "S"], ["R", "S", "X"], ["S", "X", "R"]):
        flow = Flow(edges, ids)
        answers = {key: flow.onward(key) for key in order}
        assert answers == {"X": {"C"}, "R": {"C"}, "S": {"C"}}, order


def test_a_name_splits_at_an_underscore_that_starts_a_word_only() -> None:
    def parts(scope: str) -> list[str]:
        return [scope[:end] for end in levels(scope)]

    assert parts("net/_stem/conv") == ["net", "net/_stem", "net/_stem/conv"]
    assert parts("a__b") == ["a", "a__b"]
    assert parts("conv2_block1_1_conv_1") == [
        "conv2",
        "conv2_block1",
        "conv2_block1_1",
        "conv2_block1_1_conv_1",
    ]
    assert parts("transformer_layer_0_1") == ["transformer", "transformer_layer_0_1"]
