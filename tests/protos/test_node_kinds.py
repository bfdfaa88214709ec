"""A serialized NodeDef is split on the wire into its name, op type and inputs, and nodes whose
other bytes repeat share one kind: the graph built is the one protobuf's own parse gives."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import TensorRef
from gradcheck_cli.protos import graph_builder, tf_protos
from gradcheck_cli.protos.graph_builder import GraphBuilder
from gradcheck_cli.protos.op_defs import merged_op_defs
from gradcheck_cli.protos.tf_protos import parse_node_def, protos, split_node_def


def _node(name: str, op: str, inputs: list[str], dtype: int = 1) -> Any:
    node = protos().node_def_pb2.NodeDef(name=name, op=op, input=inputs)
    node.attr["T"].type = dtype
    return node


def test_the_split_reads_what_protobuf_reads() -> None:
    node = _node("scope/mul_1", "Mul", ["x", "scope/y:z:0", "^control"])
    node.device = "/cpu:0"
    raw = node.SerializeToString()
    name, op, inputs, rest = split_node_def(raw)  # type: ignore[misc]
    assert (name, op, inputs) == (node.name, node.op, list(node.input))
    reparsed = protos().node_def_pb2.NodeDef.FromString(rest)
    assert reparsed.device == "/cpu:0" and reparsed.attr["T"].type == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x12\x03Mul",  # an op type and no name
        b"\x0a\x01a",  # a name and no op type
        b"\x0a\x05ab",  # a length past the end
        b"\x0a\x02\xff\xfe\x12\x03Mul",  # a name that is not UTF-8
        b"\x0a\xff\xff\xff\xff\xff\xff\x01",  # a length that never ends
    ],
)
def test_bytes_the_split_does_not_read_are_left_to_protobuf(raw: bytes) -> None:
    assert split_node_def(raw) is None


def _field(tag: int, data: bytes) -> bytes:
    length, size = bytearray(), len(data)
    while size >= 0x80:
        length.append(size & 0x7F | 0x80)
        size >>= 7
    return bytes([tag, *length, size]) + data


def test_the_short_way_of_the_split_agrees_with_its_general_way() -> None:
    """Names, op types and inputs of one length byte take a short way: on any bytes (long
    fields, wrong tags, cut short, not UTF-8) it gives what the general way gives."""
    rng = random.Random(32)
    texts = [b"", b"a", b"x" * 127, b"y" * 128, b"z" * 300, b"\xff\xfe", "é".encode(), b"n:o:0"]
    read = 0
    for _ in range(20_000):
        tags = [0x0A, 0x12] + [0x1A] * rng.randint(0, 3) + rng.choice([[], [0x22], [0x0A]])
        tags = [rng.choice([0x0A, 0x12, 0x1A, 0x22]) if rng.random() < 0.03 else t for t in tags]
        raw = b"".join(_field(tag, rng.choice(texts)) for tag in tags)
        if rng.random() < 0.2:
            raw = raw[: rng.randint(0, len(raw))]
        if rng.random() < 0.05:
            raw += bytes([rng.choice([0x0A, 0x12, 0x1A])])
        split = split_node_def(raw)
        assert split == tf_protos._split_node_def(raw), raw
        read += split is not None
    assert read > 5_000  # the bytes are mostly a readable NodeDef's


def _function(nodes: list[Any]) -> Any:
    function = protos().function_pb2.FunctionDef()
    function.signature.name = "f"
    arg = function.signature.input_arg.add()
    arg.name, arg.type = "x", 1
    out = function.signature.output_arg.add()
    out.name, out.type = "out", 1
    function.ret["out"] = f"{nodes[-1].name}:z:0"
    function.node_def.extend(nodes)
    return function


def _build(function: Any) -> Any:
    """The body of `function` as gradcheck builds a SavedModel's: NodeDefs kept serialized."""
    lazy = [node.SerializeToString() for node in function.node_def]

    class Serialized:
        signature = function.signature
        ret = function.ret
        node_def = lazy

        @staticmethod
        def ByteSize() -> int:
            return int(function.ByteSize())

    op_defs = merged_op_defs([])
    return GraphBuilder({"f": Serialized}, op_defs).add_function("f")


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The NodeDefs the builder parses, as it parses them."""
    met: list[Any] = []

    def counted(node: Any, function: str, what: str = "SavedModel") -> Any:
        met.append(node)
        return parse_node_def(node, function, what)

    monkeypatch.setattr(graph_builder, "parse_node_def", counted)
    return met


def test_nodes_of_one_kind_share_it_and_each_keeps_its_own_name_and_inputs(
    parsed: list[Any],
) -> None:
    nodes = [_node("a", "Tanh", ["x"])]
    nodes += [
        _node(f"t{k}", "Tanh", [f"{nodes[-1].name if k == 0 else f't{k - 1}'}:y:0"])
        for k in range(3)
    ]
    nodes.append(_node("cast", "Cast", ["t2:y:0"]))
    nodes[-1].attr["DstT"].type = 3  # int32
    nodes[-1].attr["SrcT"].type = 1
    nodes.append(_node("out", "Tanh", ["cast:y:0"]))
    body = _build(_function(nodes))
    assert [node.name for node in body.nodes.values()] == [
        "x",
        "a",
        "t0",
        "t1",
        "t2",
        "cast",
        "out",
    ]
    assert body.nodes["t1"].inputs == (TensorRef("t0", 0),)
    assert body.nodes["t1"].attrs == body.nodes["a"].attrs == {"T": "float32"}
    assert body.nodes["cast"].attrs == {"DstT": "int32", "SrcT": "float32", "T": "float32"}
    flat = body.nodes
    shared = {flat.attrs[flat.ids[name]] for name in ("a", "t0", "t1", "t2", "out")}
    assert len(shared) == 1 and flat.attrs[flat.ids["cast"]] not in shared
    # The first two Tanh (a kind is kept from its second node on) and the Cast, met once;
    # the other Tanh nodes are split only.
    assert [parse_node_def(raw, "f").name for raw in parsed] == ["a", "t0", "cast"]
    assert body.nodes["out"].output_dtypes == ("float32",)


def test_a_name_repeated_after_the_attributes_is_the_name_protobuf_reads() -> None:
    # Protobuf keeps the last value of a field written twice; the split sees the first.
    first = _node("a", "Tanh", ["x"])
    twice = _node("b", "Tanh", ["a:y:0"])
    raw = twice.SerializeToString() + b"\x0a\x01c"  # name "c", after the attributes
    assert protos().node_def_pb2.NodeDef.FromString(raw).name == "c"
    function = _function([first])
    builder_input = [first.SerializeToString(), raw, raw.replace(b"\x0a\x01b", b"\x0a\x01d", 1)]

    class Serialized:
        signature = function.signature
        ret = {"out": "c:y:0"}
        node_def = builder_input

        @staticmethod
        def ByteSize() -> int:
            return sum(len(b) for b in builder_input)

    with pytest.raises(GradcheckError, match="is the name of two nodes"):
        # Both crafted nodes are named "c" by protobuf: a name used twice is refused.
        GraphBuilder({"f": Serialized}, merged_op_defs([])).add_function("f")
    builder_input.pop()
    body = GraphBuilder({"f": Serialized}, merged_op_defs([])).add_function("f")
    assert list(body.nodes) == ["x", "a", "c"]


@pytest.mark.parametrize("index", ["²", "١", "0x1", "-1"])
def test_an_output_index_not_written_in_decimal_digits_is_refused(index: str) -> None:
    # "²" is a digit to str.isdigit but not to int(); "١" is decimal to int() but not to
    # TensorFlow. Each is one clear refusal, never a traceback.
    nodes = [_node("a", "Tanh", ["x"]), _node("b", "Tanh", [f"a:y:{index}"])]
    with pytest.raises(GradcheckError, match="a function input reads"):
        _build(_function(nodes))


def test_a_node_read_before_it_is_defined_is_its_readers_producer() -> None:
    # FunctionDefs need not list a producer before its readers: the input is numbered when the
    # body is finished, at the output its argument name gives.
    late = _node("late", "Tanh", ["x"])
    nodes = [_node("early", "Tanh", ["late:y:0", "x"]), late, _node("z", "Tanh", ["early:y:0"])]
    body = _build(_function(nodes))
    assert body.nodes["early"].inputs == (TensorRef("late", 0), TensorRef("x", 0))
    flat = body.nodes
    first = flat.input_start[flat.ids["early"]]
    assert flat.input_producers[first] == flat.ids["late"]


def _call(name: str, callee: str, outputs: int = 1) -> Any:
    node = protos().node_def_pb2.NodeDef(name=name, op="StatefulPartitionedCall", input=["x"])
    node.attr["f"].func.name = callee
    node.attr["Tin"].list.type.append(1)
    node.attr["Tout"].list.type.extend([1] * outputs)
    node.attr["config"].s = b""
    return node


def test_calls_alike_but_for_their_callees_share_a_kind_and_each_calls_its_own(
    parsed: list[Any],
) -> None:
    nodes = [_call(f"call_{k}", f"callee_{k}") for k in range(4)]
    nodes.append(_call("wide", "callee_wide", outputs=2))
    cond = protos().node_def_pb2.NodeDef(name="cond", op="StatelessIf", input=["x", "x"])
    cond.attr["then_branch"].func.name = "yes"
    cond.attr["else_branch"].func.name = "no"
    cond.attr["Tcond"].type = 1
    cond.attr["Tin"].list.type.append(1)
    cond.attr["Tout"].list.type.append(1)
    nodes.append(cond)
    nodes.append(_node("out", "Tanh", ["cond:output:0"]))
    body = _build(_function(nodes))
    for k in range(4):
        node = body.nodes[f"call_{k}"]
        assert node.calls == {"f": (f"callee_{k}",)}
        assert node.output_dtypes == ("float32",)
    assert body.nodes["wide"].calls == {"f": ("callee_wide",)}
    assert body.nodes["wide"].output_dtypes == ("float32", "float32")
    assert body.nodes["cond"].calls == {"then_branch": ("yes",), "else_branch": ("no",)}
    # One call of each kind is parsed, the others are read off their bytes.
    assert [parse_node_def(raw, "f").name for raw in parsed] == ["call_0", "wide", "cond", "out"]


def test_the_callees_cut_out_of_a_nodes_bytes_are_what_protobuf_reads() -> None:
    """On random nodes (names of any length and text, functions with attributes of their own,
    attributes of every kind), the pieces and the names put back together are the bytes, and
    the names are the attributes' functions; bytes cut short are never misread."""
    rng = random.Random(33)
    texts = ["", "f", "g" * 127, "h" * 200, "é", "a/b:0"]
    cut_some = 0
    for _ in range(3_000):
        node = protos().node_def_pb2.NodeDef(name="n", op="Op", input=["x"])
        expected = {}
        for key in rng.sample(["f", "then_branch", "body", "T", "Tout", "s"], rng.randint(0, 4)):
            kind = rng.choice(["func", "func", "type", "s", "list"])
            if kind == "func":
                node.attr[key].func.name = rng.choice(texts)
                if node.attr[key].func.name:  # an empty name is not written: nothing to cut
                    expected[key] = node.attr[key].func.name
                if rng.random() < 0.3:
                    node.attr[key].func.attr["inner"].i = rng.randint(0, 300)
            elif kind == "type":
                node.attr[key].type = 1
            elif kind == "s":
                node.attr[key].s = rng.choice(texts).encode() * rng.randint(1, 3)
            else:
                node.attr[key].list.type.extend([1] * rng.randint(0, 200))
        if rng.random() < 0.2:
            node.device = "/cpu:0"
        rest = split_node_def(node.SerializeToString())[3]  # type: ignore[index]
        cut = tf_protos.cut_callees(rest)
        if not expected:
            assert cut is None
            continue
        assert cut is not None
        pieces, names = cut
        assert dict(names) == expected
        rebuilt = pieces[0] + b"".join(
            name.encode() + piece for (_, name), piece in zip(names, pieces[1:])
        )
        assert rebuilt == rest
        cut_some += 1
        for end in rng.sample(range(len(rest)), min(5, len(rest))):
            short = tf_protos.cut_callees(rest[:end])
            if short is not None:  # cut at a field's end: the fields before it, as they are
                assert short[1] == names[: len(short[1])]
    assert cut_some > 1_000


@pytest.mark.parametrize("where", ["argument", "node"])
def test_a_name_given_an_argument_twice_or_an_argument_and_a_node_is_refused(where: str) -> None:
    nodes = [_node("x" if where == "node" else "a", "Tanh", ["x"])]
    function = _function(nodes)
    if where == "argument":
        repeated = function.signature.input_arg.add()
        repeated.name, repeated.type = "x", 1
    with pytest.raises(GradcheckError, match=f"{where} 'x' in function 'f'.*two nodes"):
        _build(function)
