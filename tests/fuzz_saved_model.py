"""Mutate real saved_model.pb files and check gradcheck answers every one with a verdict or a
clear error: never a traceback, never a hang.

The test suite runs a few hundred cases; a larger seeded run:

    python -m tests.fuzz_saved_model SAVED_MODEL_DIR --cases 5000 --seed 1
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from gradcheck_cli import GradcheckError, check
from gradcheck_cli.protos.tf_protos import protos

SLOW_SECONDS = 10.0


def _byte_mutation(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.choice(["truncate", "flip", "duplicate", "drop"])
    if kind == "truncate":
        return bytes(b[: rng.randrange(len(b))])
    if kind == "flip":
        for _ in range(rng.randint(1, 20)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    start = rng.randrange(len(b))
    end = min(len(b), start + rng.randint(1, 200))
    if kind == "duplicate":
        b[end:end] = b[start:end]
    else:
        del b[start:end]
    return bytes(b)


def _structural_mutation(data: bytes, rng: random.Random) -> bytes:
    saved_model = protos().saved_model_pb2.SavedModel()
    saved_model.ParseFromString(data)
    meta_graph = saved_model.meta_graphs[0]
    library = meta_graph.graph_def.library
    object_graph = meta_graph.object_graph_def
    for _ in range(rng.randint(1, 4)):
        if not library.function:
            break
        function = rng.choice(library.function)
        mutation = rng.randrange(16)
        if mutation == 0:
            _drop_node(function, rng)
        elif mutation == 1:
            _dangle_input(function, rng)
        elif mutation == 2:
            _call(function, function, "self_call")
        elif mutation == 3:
            _call(function, rng.choice(library.function), "cycle")
        elif mutation == 4:
            _missing_callee(function, rng)
        elif mutation == 5:
            del library.function[rng.randrange(len(library.function))]
        elif mutation == 6:
            _duplicate_node(function, rng)
        elif mutation == 7:
            _bad_ret(function, rng)
        elif mutation == 8:
            _bad_child(object_graph, rng)
        elif mutation == 9:
            _bad_bound_input(object_graph, rng)
        elif mutation == 10:
            _huge_number(function, rng)
        elif mutation == 11:
            _bad_dtype(function, rng)
        elif mutation == 12:
            _long_type_list(function, rng)
        elif mutation == 13:
            _bad_variable_shape(object_graph, rng)
        elif mutation == 14:
            _huge_output_index(function, rng)
        else:
            _attribute_of_wrong_kind(function, rng)
    return saved_model.SerializeToString()


def _drop_node(function: Any, rng: random.Random) -> None:
    if function.node_def:
        del function.node_def[rng.randrange(len(function.node_def))]


def _dangle_input(function: Any, rng: random.Random) -> None:
    nodes = [n for n in function.node_def if n.input]
    if nodes:
        node = rng.choice(nodes)
        node.input[rng.randrange(len(node.input))] = rng.choice(
            ["ghost:output:0", "ghost", "x:y:z:w", ":0", "", "a:b:-1"]
        )


def _call(caller: Any, callee: Any, name: str) -> None:
    node = caller.node_def.add()
    node.name = name
    node.op = "PartitionedCall"
    node.attr["f"].func.name = callee.signature.name
    if caller.signature.input_arg:
        node.input.append(caller.signature.input_arg[0].name)
    if caller.signature.output_arg:
        caller.ret[caller.signature.output_arg[0].name] = f"{name}:output:0"


def _missing_callee(function: Any, rng: random.Random) -> None:
    if function.node_def:
        rng.choice(function.node_def).attr["f"].func.name = "does_not_exist"


def _duplicate_node(function: Any, rng: random.Random) -> None:
    if function.node_def:
        function.node_def.add().CopyFrom(rng.choice(function.node_def))


def _bad_ret(function: Any, rng: random.Random) -> None:
    if function.signature.output_arg:
        name = function.signature.output_arg[0].name
        function.ret[name] = rng.choice(["ghost:output:0", "", "x"])


def _bad_child(object_graph: Any, rng: random.Random) -> None:
    node = rng.choice(object_graph.nodes)
    if node.children:
        node.children[0].node_id = rng.randint(0, 10**6)


def _bad_bound_input(object_graph: Any, rng: random.Random) -> None:
    for concrete in object_graph.concrete_functions.values():
        if concrete.bound_inputs:
            concrete.bound_inputs[0] = rng.randint(0, 10**6)


_NUMBERS = (2**28, 2**40, 2**63 - 1, 10**6, -1, -(2**31), 0)
_DTYPES = (9999, 100, 200, 124, -5, 0)


def _huge_number(function: Any, rng: random.Random) -> None:
    """An output count from an attribute (Unpack's num, AddN's N...) far too large or negative."""
    if not function.node_def:
        return
    node = rng.choice(function.node_def)
    key = next((k for k in ("num", "N", "num_split") if k in node.attr), None)
    if key is None:
        node = function.node_def.add()
        node.name, node.op, key = "crafted_unpack", "Unpack", "num"
        node.attr["T"].type = 1
        if function.signature.input_arg:
            node.input.append(function.signature.input_arg[0].name)
    node.attr[key].i = rng.choice(_NUMBERS)


def _bad_dtype(function: Any, rng: random.Random) -> None:
    """A dtype enum value TensorFlow does not define, on an attribute or an argument."""
    typed = [(n, k) for n in function.node_def for k in n.attr if n.attr[k].HasField("type")]
    if typed and rng.random() < 0.7:
        node, key = rng.choice(typed)
        node.attr[key].type = rng.choice(_DTYPES)
    elif function.signature.input_arg:
        rng.choice(function.signature.input_arg).type = rng.choice(_DTYPES)


def _long_type_list(function: Any, rng: random.Random) -> None:
    """A type list (IdentityN's T, a call's Tout) far longer than the node's inputs."""
    listed = [(n, k) for n in function.node_def for k in n.attr if n.attr[k].HasField("list")]
    if listed:
        node, key = rng.choice(listed)
        node.attr[key].list.type.extend([1] * rng.choice((100, 3000)))


def _bad_variable_shape(object_graph: Any, rng: random.Random) -> None:
    variables = [n for n in object_graph.nodes if n.WhichOneof("kind") == "variable"]
    if variables:
        shape = rng.choice(variables).variable.shape
        dims = rng.choice(([1] * 300, [2**62, 2**62], [-7], [-(2**40), 3]))
        for size in dims:
            shape.dim.add().size = size


def _huge_output_index(function: Any, rng: random.Random) -> None:
    nodes = [n for n in function.node_def if n.input and not n.input[0].startswith("^")]
    if nodes:
        node = rng.choice(nodes)
        producer = node.input[0].rsplit(":", 1)[0]
        node.input[0] = f"{producer}:{rng.choice((2**28, 2**62, 10**5))}"


def _attribute_of_wrong_kind(function: Any, rng: random.Random) -> None:
    """An attribute holding another kind of value than its OpDef says (a dtype as `num`)."""
    if function.node_def:
        node = rng.choice(function.node_def)
        key = rng.choice(("T", "num", "N", "Tout", "dtype"))
        value = node.attr[key]
        if rng.random() < 0.5:
            value.i = 3
        else:
            value.s = b"\xff"


def fuzz(source: Path, cases: int, seed: int, loss: str = "loss") -> list[str]:
    """Run `cases` mutations of `source`; the problems found (empty when all went well)."""
    rng = random.Random(seed)
    data = (source / "saved_model.pb").read_bytes()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gradcheck-fuzz-") as scratch:
        for case in range(cases):
            target = Path(scratch) / f"case{case}"
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("variables"))
            mutate = _byte_mutation if case % 2 else _structural_mutation
            (target / "saved_model.pb").write_bytes(mutate(data, rng))
            started = time.perf_counter()
            try:
                check(target, loss)
            except GradcheckError as error:
                if "\n" in str(error).strip():
                    problems.append(f"case {case}: a message of several lines: {error}")
            except Exception:  # the point of the fuzz test: anything else is a bug
                problems.append(f"case {case} ({mutate.__name__}):\n{traceback.format_exc()}")
            elapsed = time.perf_counter() - started
            if elapsed > SLOW_SECONDS:
                problems.append(f"case {case} ({mutate.__name__}) took {elapsed:.1f} s")
            shutil.rmtree(target)
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("saved_model", type=Path)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--loss", default="loss")
    args = parser.parse_args()
    problems = fuzz(args.saved_model, args.cases, args.seed, args.loss)
    print(f"{args.cases} cases, seed {args.seed}: {len(problems)} problems")
    for problem in problems:
        print(problem)
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
