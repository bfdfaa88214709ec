"""The model's map as an inline SVG: scopes as rounded boxes coloured by their verdicts, laid
out top-down from the inputs to the loss, and each cut a red marker where it sits.

The layout is grandalf's Sugiyama layering (pure Python, imported when a map is drawn). Every
name from the model goes through `html.escape`, in text and attributes alike. Nodes and cuts
carry classes and `data-` attributes (`map-node status-blocked`, `data-scope`; `map-cut`,
`data-op`) for the page's script and tests to find them.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath

from gradcheck_cli.analysis.model_map import MapCut, MapNode, MapStatus, ModelMap, NodeKind

# Fill and stroke per status: green ok, red blocked, orange unused, grey frozen, blue allowed.
COLOURS = {
    MapStatus.OK: ("#dcf2dc", "#2e7d32"),
    MapStatus.BLOCKED: ("#fbdada", "#c62828"),
    MapStatus.UNUSED: ("#fde6c8", "#e65100"),
    MapStatus.FROZEN: ("#e6e6e6", "#757575"),
    MapStatus.ALLOWED: ("#dbe7f7", "#1565c0"),
    MapStatus.NONE: ("#ffffff", "#9e9e9e"),
}
SPECIAL = {NodeKind.INPUT: ("#f5f5f5", "#616161"), NodeKind.LOSS: ("#fff8e1", "#8d6e63")}
CUT_COLOUR = "#c62828"
DEAD = frozenset({MapStatus.BLOCKED, MapStatus.UNUSED, MapStatus.ALLOWED})
"""The statuses of the variables whose stories the page tells."""

CHAR_WIDTH = 7.2  # of the 12px sans-serif labels, about
CUT_CHAR_WIDTH = 7.0  # of the 11px cut labels: generous, so a label never runs off the drawing
NODE_HEIGHT = 40
PADDING = 24  # inside a box, beside its label
MARGIN = 24  # around everything drawn
MARKER_RADIUS = 6  # a cut's circle
LABEL_GAP = 10  # from a cut's marker to its label
COMPONENT_GAP = 40
CUT_STEP = 16  # between two cuts at one place
RANK_GAP = 48  # between the rows of the layout
ROW_WIDTH = 960  # the least width of a row of nodes that nothing connects


@dataclass
class _Box:
    """A node's size, and the centre grandalf places it at (`xy`)."""

    w: float
    h: float
    xy: tuple[float, float] = (0.0, 0.0)


@dataclass
class _Line:
    """An edge's route, as grandalf gives it (`setpath`)."""

    points: list[tuple[float, float]] = field(default_factory=list)

    def setpath(self, points: Sequence[tuple[float, float]]) -> None:
        self.points = [(float(x), float(y)) for x, y in points]


def map_svg(
    model_map: ModelMap,
    id_prefix: str = "map",
    node_links: Mapping[str, str] | None = None,
    cut_links: Mapping[str, str] | None = None,
    file_names: Mapping[str, str] | None = None,
) -> str:
    """`model_map` drawn as one `<svg>` element; `id_prefix` keeps the ids of two maps on one
    page apart. A node in `node_links` (by its id) is a link to the page's element of that id,
    a cut's label in `cut_links` (by its op) too. A cut's file is named by its name, or as
    `file_names` names it (a notebook's cell)."""
    node_links, cut_links = node_links or {}, cut_links or {}
    model_map = _renamed(model_map, file_names or {})
    boxes = {node.id: _Box(_width(node), NODE_HEIGHT) for node in model_map.nodes}
    lines = {(e.source, e.target): _Line() for e in model_map.edges}
    _layout(model_map, boxes, lines)
    _make_room(model_map.cuts, boxes, lines)
    width, height = _fit(model_map.cuts, boxes, lines)
    prefix = html.escape(id_prefix, quote=True)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="model-map" id="{prefix}"'
        f' width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}"'
        ' font-family="sans-serif" font-size="12" role="img"'
        f' aria-label="{_e(_summary(model_map))}">',
        "<defs>"
        f'<marker id="{prefix}-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8"'
        ' markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"'
        ' fill="#757575"/></marker></defs>',
        '<g class="map-edges">',
    ]
    for (source, target), points in sorted(_routes(boxes, lines).items()):
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(points)
        )
        out.append(
            f'<path class="map-edge" data-source="{_e(source)}" data-target="{_e(target)}"'
            f' d="{path}" fill="none" stroke="#9e9e9e" stroke-width="1.5"'
            f' marker-end="url(#{prefix}-arrow)"/>'
        )
    out.append('</g><g class="map-nodes">')
    out += (
        _linked(_node(node, boxes[node.id], prefix), node_links.get(node.id))
        for node in model_map.nodes
    )
    out.append('</g><g class="map-cuts">')
    out += (
        _cut(place, cut_links.get(place.cut.op)) for place in _places(model_map.cuts, boxes, lines)
    )
    out.append("</g></svg>")
    return "\n".join(out)


def _renamed(model_map: ModelMap, file_names: Mapping[str, str]) -> ModelMap:
    """The map with its cuts' files named as `file_names` names them."""
    cuts = tuple(
        replace(cut, location=replace(cut.location, file=file_names[cut.location.file]))
        if cut.location is not None and cut.location.file in file_names
        else cut
        for cut in model_map.cuts
    )
    return replace(model_map, cuts=cuts)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _linked(drawn: str, link: str | None) -> str:
    """`drawn` as a link to the page's element with the id `link`, when there is one."""
    return drawn if link is None else f'<a href="#{_e(link)}">{drawn}</a>'


def _label(node: MapNode) -> str:
    return f"{node.label} ×{node.count}" if node.count > 1 else node.label


def _detail(node: MapNode) -> str:
    if node.kind is NodeKind.INPUT:
        return "input"
    parts = [f"{node.ops} op{'s' if node.ops != 1 else ''}"]
    if node.variables:
        count = len(node.variables)
        parts.append(f"{count} variable{'s' if count != 1 else ''}")
    return " · ".join(parts)


def _width(node: MapNode) -> float:
    return max(len(_label(node)), len(_detail(node))) * CHAR_WIDTH + PADDING


def _summary(model_map: ModelMap) -> str:
    dead = sum(1 for n in model_map.nodes if n.status in (MapStatus.BLOCKED, MapStatus.UNUSED))
    return (
        f"Model map: {len(model_map.nodes)} nodes, {len(model_map.edges)} edges,"
        f" {dead} with dead variables, {len(model_map.cuts)} cuts"
    )


def _layout(
    model_map: ModelMap, boxes: dict[str, _Box], lines: dict[tuple[str, str], _Line]
) -> None:
    """Places every box (centres in `xy`) and routes every line: each connected part of the map
    laid out top-down by grandalf, the parts side by side, and the nodes no data flows to or
    from (a layer never called) in rows below them."""
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    vertices = {node.id: Vertex(node.id) for node in model_map.nodes}
    for node_id, vertex in vertices.items():
        vertex.view = boxes[node_id]
    edges = []
    for (source, target), line in lines.items():
        edge = Edge(vertices[source], vertices[target])
        edge.view = line
        edges.append(edge)
    graph = Graph(list(vertices.values()), edges)
    left = bottom = 0.0
    for part in graph.C:
        if not part.sE:
            continue
        layout = SugiyamaLayout(part)
        layout.xspace, layout.yspace = RANK_GAP / 2, RANK_GAP
        roots = [v for v in part.sV if not v.e_in()]
        layout.init_all(roots=roots or None)
        layout.draw()
        placed = [v.view for v in part.sV]
        routes = [edge.view.points for edge in part.sE]
        # A line routed around a box (an edge going back up) can pass beyond every box.
        xs = [x for box in placed for x in (box.xy[0] - box.w / 2, box.xy[0] + box.w / 2)]
        xs += [x for points in routes for x, _ in points]
        top = min(box.xy[1] - box.h / 2 for box in placed)
        shift = (left - min(xs), -top)
        for box in placed:
            box.xy = (box.xy[0] + shift[0], box.xy[1] + shift[1])
            bottom = max(bottom, box.xy[1] + box.h / 2)
        for edge in part.sE:
            edge.view.points = [(x + shift[0], y + shift[1]) for x, y in edge.view.points]
        left += max(xs) - min(xs) + COMPONENT_GAP
    connected = {vertex.data for edge in edges for vertex in edge.v}
    alone = [boxes[node.id] for node in model_map.nodes if node.id not in connected]
    _rows(alone, max(left - COMPONENT_GAP, ROW_WIDTH), bottom)


def _rows(placed: list[_Box], width: float, top: float) -> None:
    """Sets `placed` in rows of at most `width` (one box at least), from `top` down."""
    x, y = 0.0, top + RANK_GAP if top else 0.0
    for box in placed:
        if x and x + box.w > width:
            x, y = 0.0, y + NODE_HEIGHT + RANK_GAP / 2
        box.xy = (x + box.w / 2, y + box.h / 2)
        x += box.w + RANK_GAP / 2


def _node(node: MapNode, box: _Box, prefix: str) -> str:
    fill, stroke = SPECIAL.get(node.kind) or COLOURS[node.status]
    x, y = box.xy
    title = [_label(node), _detail(node)]
    title += [f"{v.name}: {v.status.value}" for v in node.variables]
    if len(node.scopes) > 1:
        title.append("scopes: " + ", ".join(node.scopes))
    return (
        f'<g class="map-node status-{node.status.value} kind-{node.kind.value}"'
        f' id="{prefix}-node-{_e(node.id)}" data-node="{_e(node.id)}"'
        f' data-scope="{_e(node.label)}" data-status="{node.status.value}"'
        f' data-count="{node.count}" data-ops="{node.ops}">'
        f"<title>{_e(chr(10).join(title))}</title>"
        f'<rect x="{x - box.w / 2:.1f}" y="{y - box.h / 2:.1f}" width="{box.w:.1f}"'
        f' height="{box.h:.1f}" rx="8" ry="8" fill="{fill}" stroke="{stroke}"'
        f' stroke-width="{2 if node.status is MapStatus.BLOCKED else 1.2}"/>'
        f'<text x="{x:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-weight="bold">'
        f"{_e(_label(node))}</text>"
        f'<text x="{x:.1f}" y="{y + 12:.1f}" text-anchor="middle" font-size="10"'
        f' fill="#555555">{_e(_detail(node))}</text></g>'
    )


def _cut_label(cut: MapCut) -> str:
    """`✂ Cast (GC102) train.py:40`."""
    text = f"✂ {cut.op_type}"
    if cut.code:
        text += f" ({cut.code})"
    if cut.location is not None:
        text += f" {PurePath(cut.location.file).name}:{cut.location.line}"
    return text


@dataclass
class _CutPlace:
    """Where a cut's marker sits (its label starts just right of it), and the edge it is on."""

    cut: MapCut
    x: float
    y: float
    edge: tuple[str, str] | None

    def label_box(self) -> tuple[float, float, float, float]:
        """The label's left, top, right and bottom, its width estimated generously."""
        right = self.x + LABEL_GAP + len(_cut_label(self.cut)) * CUT_CHAR_WIDTH
        return self.x + LABEL_GAP, self.y - 10, right, self.y + 7


def _places(
    cuts: Iterable[MapCut], boxes: dict[str, _Box], lines: dict[tuple[str, str], _Line]
) -> list[_CutPlace]:
    """Each cut's marker: at the middle of its edge, or on its node's right side; cuts at one
    place stacked downwards."""
    places = []
    taken: dict[tuple[float, float], int] = {}
    for cut in cuts:
        edge = (cut.edge.source, cut.edge.target) if cut.edge is not None else None
        if edge in lines and lines[edge].points:
            x, y = _middle(lines[edge].points)
        elif cut.node in boxes:
            box = boxes[cut.node]
            x, y = box.xy[0] + box.w / 2, box.xy[1] - box.h / 2 + 8
        else:
            continue
        stacked = taken.get((x, y), 0)
        taken[(x, y)] = stacked + 1
        places.append(_CutPlace(cut, x, y + stacked * CUT_STEP, edge if edge in lines else None))
    return places


def _cut(place: _CutPlace, link: str | None) -> str:
    cut, x, y, edge = place.cut, place.x, place.y, place.edge
    title = [_cut_label(cut), f"op {cut.op}", f"reason: {cut.reason.value}"]
    if cut.location is not None:
        title.append(f"at {cut.location}")
    title += [f"blocks {name}" for name in cut.variables]
    where = f' data-edge="{_e(edge[0])}->{_e(edge[1])}"' if edge is not None else ""
    return (
        f'<g class="map-cut" data-op="{_e(cut.op)}" data-op-type="{_e(cut.op_type)}"'
        f' data-node="{_e(cut.node)}"{where}'
        f' data-code="{_e(cut.code or "")}"><title>{_e(chr(10).join(title))}</title>'
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{MARKER_RADIUS}" fill="{CUT_COLOUR}"'
        ' stroke="#ffffff"/>'
        + _linked(
            f'<text x="{x + LABEL_GAP:.1f}" y="{y + 4:.1f}" fill="{CUT_COLOUR}" font-size="11">'
            f"{_e(_cut_label(cut))}</text>",
            link,
        )
        + "</g>"
    )


def _make_room(
    cuts: Sequence[MapCut], boxes: dict[str, _Box], lines: dict[tuple[str, str], _Line]
) -> None:
    """Widens the drawing where a cut's label would run into a box on its right: everything
    right of the marker moves right, which opens no new overlap anywhere else."""
    for _ in range(2 * len(cuts) + 1):
        overlap = _first_overlap(_places(cuts, boxes, lines), boxes)
        if overlap is None:
            return
        x0, distance = overlap
        for box in boxes.values():
            if box.xy[0] > x0:
                box.xy = (box.xy[0] + distance, box.xy[1])
        for line in lines.values():
            line.points = [(x + distance if x > x0 else x, y) for x, y in line.points]


def _first_overlap(
    places: Iterable[_CutPlace], boxes: dict[str, _Box]
) -> tuple[float, float] | None:
    """The first label that overlaps a box right of its marker: the marker's x and how far
    that box must move."""
    for place in places:
        left, top, right, bottom = place.label_box()
        for box in boxes.values():
            box_left, box_top = box.xy[0] - box.w / 2, box.xy[1] - box.h / 2
            if (
                box_left > place.x
                and box_left < right + LABEL_GAP
                and box_top < bottom
                and box_top + box.h > top
            ):
                return place.x, right + LABEL_GAP - box_left
    return None


def _routes(
    boxes: dict[str, _Box], lines: dict[tuple[str, str], _Line]
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Each edge's drawn polyline, from its source box's side to its target box's."""
    return {
        (source, target): _clipped(
            line.points or [boxes[source].xy, boxes[target].xy], boxes, source, target
        )
        for (source, target), line in lines.items()
    }


def _fit(
    cuts: Sequence[MapCut], boxes: dict[str, _Box], lines: dict[tuple[str, str], _Line]
) -> tuple[float, float]:
    """Moves the drawing to `MARGIN` from the top left corner of everything drawn (boxes, edge
    routes, cut markers and their labels) and gives its width and height, `MARGIN` beyond."""
    xs: list[float] = []
    ys: list[float] = []
    for box in boxes.values():
        xs += [box.xy[0] - box.w / 2, box.xy[0] + box.w / 2]
        ys += [box.xy[1] - box.h / 2, box.xy[1] + box.h / 2]
    for points in _routes(boxes, lines).values():
        xs += [x for x, _ in points]
        ys += [y for _, y in points]
    for place in _places(cuts, boxes, lines):
        left, top, right, bottom = place.label_box()
        xs += [place.x - MARKER_RADIUS - 1, right]
        ys += [place.y - MARKER_RADIUS - 1, top, bottom, place.y + MARKER_RADIUS + 1]
    if not xs:
        return 2 * MARGIN, 2 * MARGIN
    dx, dy = MARGIN - min(xs), MARGIN - min(ys)
    for box in boxes.values():
        box.xy = (box.xy[0] + dx, box.xy[1] + dy)
    for line in lines.values():
        line.points = [(x + dx, y + dy) for x, y in line.points]
    return max(xs) - min(xs) + 2 * MARGIN, max(ys) - min(ys) + 2 * MARGIN


def _clipped(
    points: list[tuple[float, float]], boxes: dict[str, _Box], source: str, target: str
) -> list[tuple[float, float]]:
    """A route from its source box's edge to its target box's: leaving from the bottom and
    arriving at the top when it goes down, the other way when it goes back up."""
    (x0, y0), (x1, y1) = points[0], points[-1]
    down = 1 if y1 >= y0 else -1
    start = (x0, y0 + down * boxes[source].h / 2)
    end = (x1, y1 - down * boxes[target].h / 2)
    return [start, *points[1:-1], end]


def _middle(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The point halfway along a polyline (by its corners: the middle segment's middle)."""
    if len(points) == 1:
        return points[0]
    i = (len(points) - 1) // 2
    (x0, y0), (x1, y1) = points[i], points[i + 1]
    return (x0 + x1) / 2, (y0 + y1) / 2
