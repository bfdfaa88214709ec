"""The model map's SVG: well-formed, one box per node with its status, cuts findable, names
escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from gradcheck_cli.analysis.model_map import (
    LOSS_ID,
    MapCut,
    MapEdge,
    MapNode,
    MapStatus,
    MapVariable,
    ModelMap,
    NodeKind,
)
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters.html.map_svg import map_svg

SVG = "{http://www.w3.org/2000/svg}"
CRAFTED = "<script>alert(1)</script>"


def _map() -> ModelMap:
    blocked = MapVariable(f"hidden1/{CRAFTED}", MapStatus.BLOCKED)
    nodes = (
        MapNode("input:images", "images", NodeKind.INPUT, MapStatus.NONE, 0),
        MapNode("s0", "hidden1", NodeKind.SCOPE, MapStatus.BLOCKED, 11, (blocked,)),
        MapNode("s1", "encoder/layer_0…11", NodeKind.SCOPE, MapStatus.OK, 36, count=12),
        MapNode("s2", CRAFTED, NodeKind.SCOPE, MapStatus.UNUSED, 0),
        MapNode("s3", "frozen", NodeKind.SCOPE, MapStatus.FROZEN, 2),
        MapNode("s4", "kept", NodeKind.SCOPE, MapStatus.ALLOWED, 2),
        MapNode(LOSS_ID, "loss", NodeKind.LOSS, MapStatus.NONE, 1),
    )
    edges = (
        MapEdge("input:images", "s0"),
        MapEdge("s0", "s1"),
        MapEdge("s1", LOSS_ID),
        MapEdge("s3", "s1"),
        MapEdge("s4", LOSS_ID),
    )
    here = SourceLocation("/home/me/train.py", 40)
    cuts = (
        MapCut("hidden1/Cast", "Cast", Reason.INTEGER_DTYPE, "s0", None, None, here, (), "GC102"),
        MapCut(f"s1/{CRAFTED}", "StopGradient", Reason.STOP_GRADIENT, "s1", MapEdge("s0", "s1")),
    )
    return ModelMap(nodes, edges, cuts)


def _groups(svg: str, cls: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if cls in g.get("class", "").split()]


def test_the_svg_parses_and_has_one_box_per_node_coloured_by_status() -> None:
    drawn = _map()
    svg = map_svg(drawn)
    nodes = _groups(svg, "map-node")
    assert len(nodes) == len(drawn.nodes)
    classes = {g.get("data-node"): g.get("class", "").split() for g in nodes}
    assert "status-blocked" in classes["s0"] and "status-ok" in classes["s1"]
    assert "status-unused" in classes["s2"] and "status-frozen" in classes["s3"]
    assert "status-allowed" in classes["s4"]
    scopes = {g.get("data-scope") for g in nodes}
    assert {"hidden1", "encoder/layer_0…11", CRAFTED} <= scopes
    text = {"".join(g.itertext()) for g in nodes}
    assert any("encoder/layer_0…11 ×12" in t for t in text)
    assert len(ET.fromstring(svg).findall(f".//{SVG}path[@class='map-edge']")) == 5


def test_each_cut_is_a_marker_with_its_op_type_code_and_line() -> None:
    cuts = _groups(map_svg(_map()), "map-cut")
    assert [g.get("data-op") for g in cuts] == ["hidden1/Cast", f"s1/{CRAFTED}"]
    visible = cuts[0].find(f"{SVG}text")
    assert visible is not None and visible.text == "✂ Cast (GC102) train.py:40"
    title = cuts[0].find(f"{SVG}title")
    assert title is not None and "/home/me/train.py:40" in (title.text or "")
    assert cuts[1].get("data-edge") == "s0->s1"


def test_crafted_names_render_as_text() -> None:
    svg = map_svg(_map())
    assert CRAFTED not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    root = ET.fromstring(svg)
    assert not [element for element in root.iter() if element.tag.endswith("script")]


def test_an_empty_map_a_lone_node_and_a_cycle_still_draw() -> None:
    ET.fromstring(map_svg(ModelMap((), ())))
    ring = tuple(MapNode(f"s{i}", f"n{i}", NodeKind.SCOPE, MapStatus.OK, 1) for i in range(3))
    edges = (MapEdge("s0", "s1"), MapEdge("s1", "s2"), MapEdge("s2", "s0"))
    assert len(_groups(map_svg(ModelMap(ring, edges)), "map-node")) == 3
    lone = ModelMap((MapNode(LOSS_ID, "loss", NodeKind.LOSS, MapStatus.NONE, 1),), ())
    assert len(_groups(map_svg(lone), "map-node")) == 1


def _numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", text)]


def _cyclic_map(cuts: bool) -> ModelMap:
    """A cycle (its edge back up is routed around the boxes, beyond them) and, with `cuts`, a
    long cut label beside a box with a neighbour on its right."""
    names = ["input:x", "left", "right", "below"]
    nodes = tuple(
        MapNode(n, n, NodeKind.INPUT if n == "input:x" else NodeKind.SCOPE, MapStatus.OK, 1)
        for n in names
    ) + (MapNode(LOSS_ID, "loss", NodeKind.LOSS, MapStatus.NONE, 1),)
    pairs = [("input:x", "left"), ("input:x", "right"), ("left", "below"), ("right", "below")]
    pairs += [("below", "input:x"), ("below", LOSS_ID)]  # the cycle, and on to the loss
    here = SourceLocation("/home/me/a_rather_long_training_script_name.py", 1234)
    wide = MapCut("left/Cast", "Cast", Reason.INTEGER_DTYPE, "left", location=here, code="GC102")
    on_edge = MapCut("below/Stop", "StopGradient", Reason.STOP_GRADIENT, "below", None, None, here)
    return ModelMap(nodes, tuple(MapEdge(s, t) for s, t in pairs), (wide, on_edge) if cuts else ())


@pytest.mark.parametrize("cuts", [False, True], ids=["no-cuts", "cuts"])
def test_everything_drawn_lies_inside_the_view_box_and_no_cut_label_covers_a_box(
    cuts: bool,
) -> None:
    drawn = _cyclic_map(cuts)
    root = ET.fromstring(map_svg(drawn))
    left, top, width, height = _numbers(root.get("viewBox", ""))
    assert [left, top, width, height] == _numbers(f"0 0 {root.get('width')} {root.get('height')}")

    def inside(x: float, y: float) -> None:
        assert 0 <= x <= width and 0 <= y <= height, (x, y, width, height)

    rects = []
    for rect in root.iter(f"{SVG}rect"):
        x, y, w, h = (float(rect.get(a, "")) for a in ("x", "y", "width", "height"))
        inside(x, y)
        inside(x + w, y + h)
        rects.append((x, y, x + w, y + h))
    paths = root.findall(f".//{SVG}path[@class='map-edge']")
    assert len(paths) == len(drawn.edges)
    for path in paths:
        points = _numbers(path.get("d", ""))
        for x, y in zip(points[::2], points[1::2], strict=True):
            inside(x, y)
    for circle in root.iter(f"{SVG}circle"):
        inside(float(circle.get("cx", "")) - 6, float(circle.get("cy", "")) - 6)
        inside(float(circle.get("cx", "")) + 6, float(circle.get("cy", "")) + 6)
    for text in root.iter(f"{SVG}text"):
        inside(float(text.get("x", "")), float(text.get("y", "")))
    labels = [g.find(f"{SVG}text") for g in _groups(ET.tostring(root, "unicode"), "map-cut")]
    assert len(labels) == len(drawn.cuts)
    for label in labels:
        assert label is not None and label.text
        x, y = float(label.get("x", "")), float(label.get("y", ""))
        right = x + 7 * len(label.text)  # 7 px a character at 11 px, generously
        inside(right, y)
        covered = [r for r in rects if r[0] < right and r[2] > x and r[1] < y and r[3] > y - 11]
        assert covered == [], label.text


def _boxes(svg: str) -> dict[str, tuple[float, float, float, float]]:
    """Each node's box: left, top, right, bottom."""
    boxes = {}
    for group in _groups(svg, "map-node"):
        rect = group.find(f"{SVG}rect")
        assert rect is not None
        x, y, w, h = (float(rect.get(a, "")) for a in ("x", "y", "width", "height"))
        boxes[group.get("data-node", "")] = (x, y, x + w, y + h)
    return boxes


def test_nodes_nothing_connects_sit_in_rows_below_the_flow_not_in_one_long_row() -> None:
    """Forty layers never called (a twin network) under a three-node chain."""
    chain = (
        MapNode("input:x", "x", NodeKind.INPUT, MapStatus.NONE, 0),
        MapNode("s0", "dense", NodeKind.SCOPE, MapStatus.OK, 2),
        MapNode(LOSS_ID, "loss", NodeKind.LOSS, MapStatus.NONE, 1),
    )
    lone = tuple(
        MapNode(f"t{i}", f"target/dense_{i}", NodeKind.SCOPE, MapStatus.UNUSED, 0)
        for i in range(40)
    )
    edges = (MapEdge("input:x", "s0"), MapEdge("s0", LOSS_ID))
    svg = map_svg(ModelMap(chain + lone, edges))
    boxes = _boxes(svg)
    width = float(ET.fromstring(svg).get("width", ""))
    assert width <= 960 + 2 * 24  # the least row width, and the margins
    flow_bottom = max(boxes[node.id][3] for node in chain)
    assert all(boxes[node.id][1] > flow_bottom for node in lone)
    assert len({boxes[node.id][1] for node in lone}) > 1  # more than one row
    placed = sorted(boxes.values())
    for i, a in enumerate(placed):  # no two boxes overlap
        for b in placed[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
