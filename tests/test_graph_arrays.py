"""A body's flat arrays: who reads each tensor, who makes it and which outputs can carry
gradient, read off the arrays in bulk, are what a walk over the nodes one by one finds (a
large body sorts its readers with NumPy, a small one without: both give the same); bodies of
one structure share its numbers and still name their own tensors."""

from __future__ import annotations

import random

from gradcheck_cli.graph import arrays
from gradcheck_cli.graph.arrays import BodyArrays
from gradcheck_cli.graph.flat_nodes import FlatNodes, Table, Tables
from gradcheck_cli.graph.model import Body, TensorRef
from tests.graph_factory import BodyFactory


def _random_body(seed: int, size: int) -> Body:
    rng = random.Random(seed)
    factory = BodyFactory("f")
    made = [factory.arg("x")]
    for k in range(size):
        widths = rng.choice([1, 1, 1, 2, 3])
        dtypes = tuple(rng.choice(["float32", "float32", "int32"]) for _ in range(widths))
        inputs = [rng.choice(made) for _ in range(rng.randint(0, 3))]
        inputs += [TensorRef("outside", 0)] if rng.random() < 0.02 or k == size // 2 else []
        out = factory.op(f"op_{k}", "Op", *inputs, dtypes=dtypes)
        made += [TensorRef(out.node, index) for index in range(widths)]
    return Body("f", factory.nodes, args=tuple(factory.args), rets=(made[-1],))


def test_readers_and_producers_are_what_a_walk_of_the_nodes_finds() -> None:
    for seed in range(5):
        body_arrays = BodyArrays(_random_body(seed, 300))
        readers: dict[int, list[int]] = {}
        for edge, t in enumerate(body_arrays.input_tensors):
            readers.setdefault(t, []).append(edge)
        for t in range(body_arrays.tensor_count):
            start, stop = body_arrays.reader_start[t], body_arrays.reader_start[t + 1]
            assert list(body_arrays.reader_edges[start:stop]) == readers.get(t, [])
        producers = body_arrays.tensor_producers()
        assert len(producers) == body_arrays.tensor_count
        for n in range(len(body_arrays)):
            for t in range(body_arrays.offsets[n], body_arrays.offsets[n + 1]):
                assert producers[t] == n
        assert all(producers[t] == -1 for t in body_arrays.outside.values())
        assert body_arrays.outside  # the random bodies read from outside, too
        carries, carrying = body_arrays.carries_gradient(), body_arrays.outputs_carry_gradient()
        for n in range(len(body_arrays)):
            outputs = range(body_arrays.offsets[n], body_arrays.offsets[n + 1])
            assert carrying[n] == all(carries[t] for t in outputs)
        assert 0 < sum(carrying) < len(carrying)  # ints and floats both


def test_numpy_sorts_the_readers_as_the_counting_sort_does() -> None:
    for seed in range(5):
        body_arrays = BodyArrays(_random_body(seed, 2_000))
        tensors, count = body_arrays.input_tensors, body_arrays.tensor_count
        assert len(tensors) < arrays.NUMPY_READERS  # the counting sort's size
        assert arrays._readers_by_numpy(tensors, count) == arrays._readers(tensors, count)


def _flat_twin(tables: Tables, prefix: str, seed: int, index_of_last: int = 0) -> Body:
    """A body of `seed`'s random structure whose names start with `prefix`, built in `tables`;
    `index_of_last`: which output of the first op the last op reads."""
    rng = random.Random(seed)
    flat = FlatNodes(tables)
    flat.append(f"{prefix}x", "_Arg", output_dtypes=("float32",))
    made = [(f"{prefix}x", 0)]
    for k in range(40):
        dtypes = tuple(rng.choice(["float32", "int32"]) for _ in range(rng.choice([1, 1, 2])))
        inputs = [rng.choice(made) for _ in range(rng.randint(1, 3))]
        if k == 39:
            inputs = [(f"{prefix}op_0", index_of_last)]
        flat.append(f"{prefix}op_{k}", "Op", inputs, dtypes)
        made += [(f"{prefix}op_{k}", index) for index in range(len(dtypes))]
    return Body(f"{prefix}f", flat.finish(), args=(f"{prefix}x",), rets=(TensorRef(*made[-1]),))


def test_bodies_of_one_structure_share_it_and_number_their_own_names() -> None:
    tables = Tables()
    first, second, third = (_flat_twin(tables, prefix, seed=7) for prefix in ("a_", "b_", "c_"))
    other = _flat_twin(tables, "d_", seed=7, index_of_last=1)
    built = [BodyArrays(body) for body in (first, second, third, other)]
    # Kept from the second body of a structure on; a body of other numbers has its own.
    assert built[1].structure is built[2].structure
    assert built[0].structure is not built[1].structure
    assert built[3].structure is not built[1].structure
    for body, shared in zip((first, second, third, other), built):
        alone = BodyArrays(Body(body.name, FlatNodes.of(body.nodes.values()), body.args, body.rets))
        assert alone.structure is not shared.structure  # other tables: nothing shared
        for field in ("widths", "offsets", "input_tensors", "edge_nodes", "rets"):
            assert getattr(shared, field) == getattr(alone, field), field
        assert shared.tensor_count == alone.tensor_count
        assert (shared.reader_start, shared.reader_edges) == (
            alone.reader_start,
            alone.reader_edges,
        )
        # Each body's tensors are named by its own nodes.
        for ref in (*body.rets, TensorRef(body.args[0], 0)):
            assert shared.ref(shared.tensor(ref)) == ref


def test_a_tables_lists_follow_it_as_it_grows() -> None:
    table: Table[tuple[str, ...]] = Tables().signatures
    table.number(("float32",))
    assert table.each(len) == [1]
    table.number(("int32", "float32"))
    table.number(("float32",))  # met before: nothing new
    assert table.each(len) == [1, 2]
    assert table.find(("int32", "float32")) == 1 and table.find(("bool",)) == -1
    assert table.find(("bool",)) == -1 and len(table.values) == 2  # finding adds nothing
