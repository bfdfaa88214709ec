"""`--format dot`: a well-formed Graphviz digraph of the dead variables' paths to the loss."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from dataclasses import dataclass, field

import pydot

from gradcheck_cli.analysis.verdicts import (
    Blocker,
    Edge,
    NestedCall,
    PathStep,
    Status,
    SubgraphOp,
    Unreached,
    VariableVerdict,
)
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.graph.model import SourceLocation, TensorRef, Variable
from gradcheck_cli.reporters import Format, render
from gradcheck_cli.reporters.dot import FOLD, ROW, render_dot
from tests.import_probe import imported_after
from tests.reporters.factories import verdict

FN = "__inference_loss_17"


STOP = "stop_gradient hides its input from the gradient"
CAST = "the Cast to int32 produces an integer tensor; integer tensors carry no gradient"
ROUND = "Round has no gradient"
ARGMAX = "ArgMax has no gradient"

# A small DOT reader for what render_dot writes (graphviz.org/doc/info/lang.html): nodes, edges,
# clusters and their members, rows. _check_structure also has pydot, a real DOT parser, read
# every document, and the dot binary draw it where Graphviz is installed.

_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:\\.|[^"\\])*")|(?P<arrow>->)|(?P<punct>[{}\[\];=,])'
    r"|(?P<word>[A-Za-z_0-9.]+))"
)


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while text[position:].strip():
        match = _TOKEN.match(text, position)
        assert match, f"cannot read DOT at {text[position : position + 40]!r}"
        tokens.append(match.group(match.lastgroup or ""))
        position = match.end()
    return tokens


def _unquote(token: str) -> str:
    if not token.startswith('"'):
        return token
    # Inside a DOT string only \" is an escape; labels additionally read \\ and \n.
    return token[1:-1].replace('\\"', '"')


def _label_text(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


@dataclass
class Dot:
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    # Each cluster's nodes, those of the clusters inside it included.
    clusters: dict[str, list[str]] = field(default_factory=dict)
    # Each cluster's label.
    cluster_labels: dict[str, str] = field(default_factory=dict)
    # `{rank=same; ...}`: nodes drawn side by side.
    rows: list[list[str]] = field(default_factory=list)

    def node_labelled(self, first_line: str, shape: str = "ellipse") -> str:
        """The one node of this shape whose label starts with `first_line`."""
        found = [
            node
            for node, attrs in self.nodes.items()
            if _label_text(attrs.get("label", node)).split("\n")[0] == first_line
            and attrs.get("shape") == shape
        ]
        assert len(found) == 1, (first_line, found)
        return found[0]

    def edge(self, source: str, target: str) -> dict[str, str]:
        found = [attrs for s, t, attrs in self.edges if (s, t) == (source, target)]
        assert len(found) == 1, (source, target)
        return found[0]


def parse(text: str) -> Dot:
    tokens = _tokens(text)
    assert tokens[:3] == ["digraph", "gradcheck", "{"], tokens[:3]
    dot = Dot()
    # The open subgraphs, innermost last, with the depth at which each was opened.
    depth, open_clusters, i = 0, [], 2

    def attributes(i: int) -> tuple[dict[str, str], int]:
        attrs: dict[str, str] = {}
        if i < len(tokens) and tokens[i] == "[":
            i += 1
            while tokens[i] != "]":
                key, equals, value = tokens[i : i + 3]
                assert equals == "=", tokens[i : i + 3]
                attrs[key] = _unquote(value)
                i += 3
                if tokens[i] == ",":
                    i += 1
            i += 1
        return attrs, i

    while i < len(tokens):
        token = tokens[i]
        if token == "{" and tokens[i + 1 : i + 5] == ["rank", "=", "same", ";"]:
            end = tokens.index("}", i)
            row = tokens[i + 5 : end]
            assert row[1::2] == [";"] * (len(row) // 2), row
            dot.rows.append([_unquote(node) for node in row[::2]])
            i = end + 1
        elif token == "{":
            depth, i = depth + 1, i + 1
        elif token == "}":
            depth, i = depth - 1, i + 1
            assert depth >= 0, "unbalanced braces"
            if open_clusters and open_clusters[-1][1] == depth:
                open_clusters.pop()
        elif token == "subgraph":
            cluster = _unquote(tokens[i + 1])
            assert cluster not in dot.clusters, f"{cluster} drawn twice"
            dot.clusters[cluster] = []
            open_clusters.append((cluster, depth))
            i += 2
        elif token in ("graph", "node", "edge"):
            _, i = attributes(i + 1)
            assert tokens[i] == ";"
            i += 1
        elif i + 1 < len(tokens) and tokens[i + 1] == "=":
            if token == "label" and open_clusters:
                dot.cluster_labels[open_clusters[-1][0]] = _unquote(tokens[i + 2])
            i += 3
            assert tokens[i] == ";"
            i += 1
        elif i + 1 < len(tokens) and tokens[i + 1] == "->":
            source, target = _unquote(token), _unquote(tokens[i + 2])
            attrs, i = attributes(i + 3)
            dot.edges.append((source, target, attrs))
            assert tokens[i] == ";"
            i += 1
        else:
            assert token.startswith('"'), f"unquoted id {token!r}"
            node = _unquote(token)
            assert node not in dot.nodes, f"{node} declared twice"
            dot.nodes[node], i = attributes(i + 1)
            for cluster, _ in open_clusters:
                dot.clusters[cluster].append(node)
            assert tokens[i] == ";"
            i += 1
    assert depth == 0, "unbalanced braces"
    return dot


def _pydot_nodes(graph: pydot.Graph) -> dict[str, dict[str, str]]:
    """Every node pydot read, in every subgraph, with its attributes."""
    found = {node.get_name(): dict(node.get_attributes()) for node in graph.get_nodes()}
    for subgraph in graph.get_subgraphs():
        for name, attrs in _pydot_nodes(subgraph).items():
            found.setdefault(name, {}).update(attrs)
    # `graph`, `node` and `edge` are the default attributes, not nodes; `{rank=same; ...}`
    # lists nodes again, with no attributes, in an anonymous subgraph.
    return {name: attrs for name, attrs in found.items() if name not in ("node", "edge", "graph")}


def _edge_count(graph: pydot.Graph) -> int:
    return len(graph.get_edges()) + sum(_edge_count(g) for g in graph.get_subgraphs())


def _check_structure(text: str) -> Dot:
    dot = parse(text)
    for source, target, _ in dot.edges:
        assert source in dot.nodes, f"edge from undeclared {source}"
        assert target in dot.nodes, f"edge to undeclared {target}"
    assert len({(s, t) for s, t, _ in dot.edges}) == len(dot.edges), "duplicate edges"
    # A real parser reads the same nodes, with the same labels.
    (graph,) = pydot.graph_from_dot_data(text)
    read = {_unquote(name): attrs for name, attrs in _pydot_nodes(graph).items()}
    assert set(read) == set(dot.nodes)
    for node, attrs in dot.nodes.items():
        assert _unquote(read[node].get("label", '""')) == attrs.get("label", "")
    assert len(graph.get_edges()) + sum(_edge_count(g) for g in graph.get_subgraphs()) == len(
        dot.edges
    )
    if shutil.which("dot"):  # the real parser too, where Graphviz is installed
        result = subprocess.run(
            ["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
    return dot


def _seed_report() -> Report:
    """The seed case: weights_i cut by a stop_gradient, and, behind it, a cast to int32."""
    weights = verdict(
        'layer1/weights_i "fixed" [0]:0',
        Status.BLOCKED,
        source=TensorRef("weights_i"),
        blockers=(
            Blocker("layer1/StopGradient", "StopGradient", Reason.STOP_GRADIENT, STOP, FN),
            Blocker("layer1/Cast", "Cast", Reason.INTEGER_DTYPE, CAST, FN),
        ),
        route=(
            PathStep("weights_i", "_Arg", FN),
            PathStep("layer1/Mul", "Mul", FN),
            PathStep("layer1/StopGradient", "StopGradient", FN, cut=Reason.STOP_GRADIENT),
            PathStep("MatMul", "MatMul", FN),
            PathStep("loss", "Mean", FN),
        ),
        subgraph=(
            Edge("weights_i", "layer1/Mul"),
            Edge("layer1/Mul", "layer1/StopGradient", cut=True),
            Edge("layer1/Mul", "layer1/Cast", cut=True),
            Edge("layer1/Cast", "layer1/Cast_1"),
            Edge("layer1/StopGradient", "MatMul"),
            Edge("layer1/Cast_1", "MatMul"),
            Edge("MatMul", "loss"),
        ),
    )
    # A second dead variable that shares the tail of the path: the edges are united.
    scale = verdict(
        "scale",
        Status.BLOCKED,
        blockers=(Blocker("Round", "Round", Reason.NON_DIFFERENTIABLE_OP, ROUND, FN),),
        subgraph=(
            Edge("scale", "Round", cut=True),
            Edge("Round", "MatMul"),
            Edge("MatMul", "loss"),
        ),
    )
    unused = verdict("dense_1/kernel\\", Status.UNUSED, unreached=Unreached.READ_NOT_REACHING)
    ok = verdict("biases", Status.OK)
    return Report(SourceInfo("model.py", "script", "loss"), (weights, scale, unused, ok))


def test_the_seed_case_draws_every_path_with_the_cuts_in_red() -> None:
    text = render_dot(_seed_report())
    dot = _check_structure(text)
    mul = dot.node_labelled("layer1/Mul")
    stop = dot.node_labelled("layer1/StopGradient")
    cast = dot.node_labelled("layer1/Cast")
    # The cut edges are red, labelled with the terminal's words for the cut, folded.
    for target, reason in ((stop, STOP), (cast, CAST)):
        attrs = dot.edge(mul, target)
        assert attrs["color"] == "red" and "bold" in attrs["style"]
        assert " ".join(_label_text(attrs["label"]).split("\n")) == reason
        assert dot.nodes[target]["color"] == "red"
    round_ = dot.node_labelled("Round")
    scale_op = dot.node_labelled("scale")
    dot.edge(dot.node_labelled("scale", "box"), scale_op)
    assert dot.edge(scale_op, round_)["color"] == "red"
    assert _label_text(dot.nodes[round_]["label"]) == "Round"
    # Edges that are not cut are not red.
    assert dot.edge(dot.node_labelled("MatMul"), dot.node_labelled("loss")).get("color") != "red"


def test_variables_are_boxes_with_their_status_and_lead_to_the_loss() -> None:
    dot = _check_structure(render_dot(_seed_report()))
    weights = dot.node_labelled('layer1/weights_i "fixed" [0]:0', "box")
    assert _label_text(dot.nodes[weights]["label"]).split("\n")[1] == "blocked"
    # The loss function's argument that stands for the variable is the variable's box.
    assert not any(node.endswith(":weights_i") for node in dot.nodes)
    dot.edge(weights, dot.node_labelled("layer1/Mul"))
    loss = [n for n, a in dot.nodes.items() if a.get("shape") == "doubleoctagon"]
    assert len(loss) == 1
    reaching = {source for source, target, _ in dot.edges if target == loss[0]}
    assert reaching == {dot.node_labelled("loss")}


def test_unused_variables_are_isolated_boxes_in_a_cluster() -> None:
    dot = _check_structure(render_dot(_seed_report()))
    unused = dot.node_labelled("dense_1/kernel\\", "box")
    clusters = [name for name, members in dot.clusters.items() if unused in members]
    assert len(clusters) == 1 and clusters[0].startswith("cluster")
    assert all(unused not in (s, t) for s, t, _ in dot.edges)
    assert not any("biases" in node for node in dot.nodes), "ok variables are not drawn"


def test_names_are_escaped() -> None:
    text = render_dot(_seed_report())
    assert r'label="layer1/weights_i \"fixed\" [0]:0\nblocked"' in text
    assert r'label="dense_1/kernel\\\nunused"' in text


def _routed(cut: str, op_type: str, reason: Reason, **fields: object) -> VariableVerdict:
    """Blocked variable w, whose route to the loss crosses the cut op `cut`."""
    return verdict(
        "w",
        Status.BLOCKED,
        source=TensorRef("w"),
        route=(
            PathStep("w", "_Arg", FN),
            PathStep(cut, op_type, FN, cut=reason),
            PathStep("loss", "Sum", FN),
        ),
        **fields,
    )


def test_without_a_subgraph_the_route_or_the_blockers_are_drawn() -> None:
    routed = _routed("Cast", "Cast", Reason.INTEGER_DTYPE)
    bare = verdict(
        "v",
        Status.BLOCKED,
        blockers=(
            # In the loss function itself, and inside a function it calls.
            Blocker("ArgMax", "ArgMax", Reason.NON_DIFFERENTIABLE_OP, ARGMAX),
            Blocker("Round", "Round", Reason.NON_DIFFERENTIABLE_OP, ROUND, "__inference_q_7"),
        ),
    )
    report = Report(SourceInfo("m", "savedmodel", "loss"), (routed, bare))
    text = render_dot(report)
    dot = _check_structure(text)
    variable = dot.node_labelled("w", "box")
    # The variable's own argument of the loss function is its box: no `_Arg` node.
    assert not any("_Arg" in attrs.get("label", "") for attrs in dot.nodes.values())
    cast = dot.node_labelled("Cast")
    assert dot.edge(variable, cast)["color"] == "red"
    # A cut the route alone tells (no blocker with its words) is red, without a code.
    assert "integer_dtype" not in text
    dot.edge(cast, dot.node_labelled("loss"))
    argmax = dot.node_labelled("ArgMax")
    assert dot.edge(dot.node_labelled("v", "box"), argmax)["label"] == ARGMAX
    round_ = dot.node_labelled("Round in q")
    assert dot.edge(dot.node_labelled("v", "box"), round_)["label"] == ROUND


def test_a_subgraph_too_large_to_draw_is_told_on_the_variable_and_its_route_drawn() -> None:
    large = _routed("stop", "StopGradient", Reason.STOP_GRADIENT, subgraph_left_out=123_456)
    report = Report(SourceInfo("m", "savedmodel", "loss"), (large,))
    dot = _check_structure(render_dot(report))
    variable = dot.node_labelled("w", "box")
    label = dot.nodes[variable]["label"]
    assert "its subgraph of about 123,456 edges is too large to draw:" in label
    stop = dot.node_labelled("stop", "ellipse")
    assert dot.edge(variable, stop)["color"] == "red"
    dot.edge(stop, dot.node_labelled("loss"))


def test_output_is_deterministic_and_clean_reports_are_valid() -> None:
    report = _seed_report()
    reordered = Report(report.source, tuple(reversed(report.variables)))
    assert render_dot(report) == render_dot(reordered)
    clean = Report(SourceInfo("m", "savedmodel", "loss"), (verdict("w", Status.OK),))
    dot = _check_structure(render_dot(clean))
    assert len(dot.nodes) == 1 and not dot.edges


def test_the_format_enum_dispatches_to_dot() -> None:
    assert Format("dot") is Format.DOT
    assert render(_seed_report(), Format.DOT) == render_dot(_seed_report())


def test_the_dot_reporter_does_not_import_tensorflow() -> None:
    assert not imported_after("import gradcheck_cli.reporters.dot, gradcheck_cli.reporters.explain")


# -- layout: top-down, long chains folded into rows; the fix beside its variable ----------------


def _chain_report(ops: int, fix: str | None = None) -> Report:
    """A variable whose route to the loss runs through `ops` MatMuls, then a StopGradient."""
    steps = (
        PathStep("w", "_Arg", FN),
        *(PathStep(f"block{i}/dense/MatMul", "MatMul", FN) for i in range(ops)),
        PathStep("sg", "StopGradient", FN, cut=Reason.STOP_GRADIENT),
        PathStep("loss", "Mean", FN),
    )
    blocked = verdict(
        "model/w",
        Status.BLOCKED,
        source=TensorRef("w"),
        blockers=(Blocker("sg", "StopGradient", Reason.STOP_GRADIENT, STOP, FN),),
        route=steps,
    )
    fixes = {"model/w": fix} if fix else {}
    return Report(SourceInfo("m.py", "script", "loss"), (blocked,), fixes=fixes)


def _svg_size(text: str) -> tuple[int, int] | None:
    if not shutil.which("dot"):
        return None
    svg = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True).stdout
    size = re.search(r'<svg width="(\d+)pt" height="(\d+)pt"', svg)
    assert size, svg[:200]
    return int(size[1]), int(size[2])


def test_a_long_chain_is_laid_out_top_down_in_rows() -> None:
    text = render_dot(_chain_report(40))
    assert "rankdir=TB" in text
    dot = _check_structure(text)
    chain = [dot.node_labelled(f"block{i}/dense/MatMul") for i in range(40)]
    chain += [dot.node_labelled("sg"), dot.node_labelled("loss")]
    # The chain, in order, in rows of ROW ops, each row one rank.
    assert [node for row in dot.rows for node in row] == chain
    assert all(len(row) == ROW for row in dot.rows[:-1]) and len(dot.rows) == 11
    for row, below in zip(dot.rows, dot.rows[1:]):
        # The row's end leads on to the next row without pulling it sideways...
        assert dot.edge(row[-1], below[0]).get("constraint") == "false"
        # ... and the rows start in one column.
        assert dot.edge(row[0], below[0])["style"] == "invis"
    size = _svg_size(text)
    if size is not None:  # Graphviz draws it narrow, not as one 10,000-point row
        width, height = size
        assert width < 1600 and height > width / 2, size


def test_a_short_chain_stays_one_column() -> None:
    text = render_dot(_chain_report(FOLD - 2))  # with sg and the loss's Mean: FOLD ops
    dot = _check_structure(text)
    assert dot.rows == []
    assert not any(attrs.get("style") == "invis" for _, _, attrs in dot.edges)


def test_rows_fold_inside_each_model_cluster() -> None:
    text = render([_chain_report(9), _chain_report(1)], Format.DOT)
    dot = _check_structure(text)
    assert len(dot.rows) == 3
    assert all(node.startswith("model 1/") for row in dot.rows for node in row)


def test_the_fix_is_a_note_beside_its_variable_as_the_terminal_words_it() -> None:
    fix = "remove the tf.stop_gradient at line 3:\n    y = x + tf.stop_gradient(q(x) - x)"
    dot = _check_structure(render_dot(_chain_report(2, fix)))
    notes = [node for node, attrs in dot.nodes.items() if attrs.get("shape") == "note"]
    assert len(notes) == 1
    label = dot.nodes[notes[0]]["label"]
    # Left-aligned lines (`\l`), the code keeping its indentation.
    assert label.split("\\l")[:-1] == [
        "fix: remove the tf.stop_gradient at line 3:",
        "    y = x + tf.stop_gradient(q(x) - x)",
    ]
    variable = dot.node_labelled("model/w", "box")
    assert dot.edge(variable, notes[0])["arrowhead"] == "none"
    assert [variable, notes[0]] in dot.rows  # beside the variable, not in the path's way
    without = _check_structure(render_dot(_chain_report(2)))
    assert not any(attrs.get("shape") == "note" for attrs in without.nodes.values())


# -- functions a cond, a loop or a call runs: a cluster each, their own cuts inside -------------


def _nested_report() -> Report:
    """`w` (the loss function's argument `w_arg`) goes into a called function `f`, whose tf.cond
    rounds it in the false branch."""
    here = SourceLocation("m.py", 3)
    inner = SourceLocation("m.py", 7)
    blocked = VariableVerdict(
        Variable("w", True, "float32", (2,), source=TensorRef("w_arg"), location=here),
        Status.BLOCKED,
        blockers=(
            Blocker("cond/Round", "Round", Reason.NON_DIFFERENTIABLE_OP, ROUND, "fb", inner),
        ),
        subgraph=(
            Edge("w_arg", "call", cut=True),
            Edge("call", "loss"),
            Edge("w_arg", "x", source_function=None, target_function="__inference_f_5"),
            Edge("x", "cond", True, "__inference_f_5", "__inference_f_5"),
            Edge("x", "x_1", source_function="__inference_f_5", target_function="fb"),
            Edge("x_1", "cond/Round", True, "fb", "fb"),
            Edge("cond/Round", "cond", False, "fb", "__inference_f_5"),
            Edge("cond", "out", False, "__inference_f_5", "__inference_f_5"),
            Edge("out", "call", False, "__inference_f_5", None),
        ),
        nested=(
            NestedCall("call", None, "__inference_f_5", "f", (("x", 0),)),
            NestedCall("cond", "__inference_f_5", "fb", "else_branch", (("x_1", 1),)),
        ),
        subgraph_ops=(
            SubgraphOp("call", "StatefulPartitionedCall", None, SourceLocation("m.py", 9)),
            SubgraphOp("cond", "If", "__inference_f_5", inner),
            SubgraphOp("cond/Round", "Round", "fb", inner),
        ),
    )
    code = {("m.py", 3): "w = tf.Variable([1.0, 2.0])", ("m.py", 7): "    y = tf.cond(c, a, b)"}
    return Report(SourceInfo("m.py", "script", "loss"), (blocked,), code=code)


def test_a_nested_function_is_a_cluster_with_its_cut_inside() -> None:
    dot = _check_structure(render_dot(_nested_report()))
    called = "cluster_function __inference_f_5"
    branch = "cluster_function fb"
    assert dot.cluster_labels[called] == "f: called by call (StatefulPartitionedCall), m.py:9"
    assert dot.cluster_labels[branch] == "fb: false branch of cond (If), m.py:7"
    # The branch is drawn inside the function whose cond runs it.
    assert set(dot.clusters[branch]) < set(dot.clusters[called])
    round_ = dot.node_labelled("cond/Round")
    assert round_ in dot.clusters[branch]
    assert dot.nodes[round_]["color"] == "red"
    assert _label_text(dot.nodes[round_]["label"]) == "cond/Round\nm.py:7\ny = tf.cond(c, a, b)"
    # Arguments say what is passed in: the variable, or the value the caller's op computes.
    outer = dot.node_labelled("w, passed as argument 0 of f")
    branch_argument = dot.node_labelled("x, passed as argument 1 of fb")
    assert outer in dot.clusters[called] and branch_argument in dot.clusters[branch]
    variable = dot.node_labelled("w", "box")
    assert _label_text(dot.nodes[variable]["label"]).split("\n")[2:] == [
        "created at m.py:3",
        "w = tf.Variable([1.0, 2.0])",
    ]
    dot.edge(variable, outer)
    dot.edge(outer, branch_argument)
    cut = [attrs for s, t, attrs in dot.edges if t == round_]
    assert len(cut) == 1 and cut[0]["label"] == ROUND and cut[0]["color"] == "red"
    # The ops that run the functions are not cuts, and nothing skips into them past the
    # function: the function returns into its op.
    call, cond = dot.node_labelled("call"), dot.node_labelled("cond")
    assert "color" not in dot.nodes[call] and "color" not in dot.nodes[cond]
    assert {s for s, t, _ in dot.edges if t == call} == {dot.node_labelled("out")}
    assert {s for s, t, _ in dot.edges if t == cond} == {round_}
    # The loss function's own argument for the variable is the variable's box.
    assert not any("w_arg" in node for node in dot.nodes)


def test_nested_clusters_stay_apart_in_each_model() -> None:
    dot = _check_structure(render([_nested_report(), _nested_report()], Format.DOT))
    functions = [name for name in dot.clusters if "function" in name]
    assert len(functions) == 4 and len(set(functions)) == 4


def test_names_in_nested_functions_are_escaped_and_still_match() -> None:
    report = _nested_report()
    (blocked,) = report.variables
    renamed = dataclasses.replace(
        blocked,
        subgraph=tuple(
            dataclasses.replace(
                e, source_function=_odd(e.source_function), target_function=_odd(e.target_function)
            )
            for e in blocked.subgraph
        ),
        nested=tuple(
            dataclasses.replace(
                n, caller_function=_odd(n.caller_function), function=_odd(n.function)
            )
            for n in blocked.nested
        ),
        subgraph_ops=tuple(
            dataclasses.replace(op, function=_odd(op.function)) for op in blocked.subgraph_ops
        ),
        blockers=tuple(dataclasses.replace(b, function=_odd(b.function)) for b in blocked.blockers),
    )
    text = render_dot(dataclasses.replace(report, variables=(renamed,)))
    dot = _check_structure(text)
    # No raw control character: no escape sequence, no line break inside a statement.
    assert "\x1b" not in text
    assert all(
        line.startswith("  ") or line in ("digraph gradcheck {", "}") for line in text.splitlines()
    )
    branch = [name for name in dot.clusters if "fb" in name]
    assert len(branch) == 1 and "\\x1b" in branch[0]
    assert dot.nodes[dot.node_labelled("cond/Round")]["color"] == "red"


def _odd(function: str | None) -> str | None:
    """A function name with a control character in it, as a crafted model may have."""
    return None if function is None else f"{function}\x1b[2J"
