"""Synthetic SavedModels of any size, written as protos: a loss of about N ops in one of four
shapes, with variables that are dead in a known way.

    python -m benchmarks.synthetic --shape {chain,tree,calls,while} --ops N OUT_DIR

TensorFlow would take far too long to trace a million ops, so TensorFlow writes a tiny template
SavedModel once (cached, `--cache DIR`) and the generated ops are spliced into the FunctionDefs
of its `loss` with the generated pb2 classes (loaded without TensorFlow's runtime). The template's
`variables/` folder is copied, so TensorFlow itself can load a generated model; gradcheck reads
only `saved_model.pb`.

Every shape keeps the template's four variables, and so its verdicts (`EXPECTED`): `alive` trains
through the generated ops; `stopped` reaches the loss only through a `tf.stop_gradient` and
`casted` only through a cast to int32 (both blocked); `unused` is never read.

- `chain`: one deep chain of elementwise ops (Mul, AddV2, Tanh, Identity) from `alive`'s read
  to the loss.
- `tree`: a binary AddV2 reduction tree over many reads of `alive`, one Mul per leaf.
- `calls`: a tree of library functions called through PartitionedCall and
  StatefulPartitionedCall, each with a short chain of ops; the `tf.stop_gradient` sits two calls
  deep.
- `while`: a StatelessWhile whose body holds the chain (and both cuts).
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks import templates
from gradcheck_cli.protos.tf_protos import protos

ROOT = Path(__file__).resolve().parents[1]

LOSS = "loss"
"""The loss function's attribute name in every generated SavedModel."""

EXPECTED = {"alive": "ok", "stopped": "blocked", "casted": "blocked", "unused": "unused"}
"""gradcheck's status of each trainable variable, whatever the shape and size."""


class Shape(str, enum.Enum):
    CHAIN = "chain"
    TREE = "tree"
    CALLS = "calls"
    WHILE = "while"


class Template(str, enum.Enum):
    """The two template SavedModels: the loss in straight-line code, or inside a while loop."""

    STRAIGHT = "straight"
    LOOP = "loop"


_TEMPLATE_OF = {
    Shape.CHAIN: Template.STRAIGHT,
    Shape.TREE: Template.STRAIGHT,
    Shape.CALLS: Template.STRAIGHT,
    Shape.WHILE: Template.LOOP,
}

_CHAIN_OPS = ("Mul", "Tanh", "AddV2", "Identity")
_OUTPUT_ARG = {
    "Mul": "z",
    "AddV2": "z",
    "Tanh": "y",
    "Identity": "output",
    "ReadVariableOp": "value",
}
_CALL_BRANCHING = 4  # callees per function in the `calls` shape
_OPS_PER_FUNCTION = 16  # own elementwise ops per function in the `calls` shape


def default_cache() -> Path:
    """Where templates (and the benchmark's models) are kept between runs."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gradcheck-benchmarks"


def source_hash(path: Path) -> str:
    """A short hash of a file's bytes, for cache folder names."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]


def run_fresh_python(argv: list[str]) -> None:
    """Run `python *argv` in a fresh process with TensorFlow's log quiet and this checkout
    importable; raise if it fails."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    done = subprocess.run(
        [sys.executable, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if done.returncode != 0:
        raise RuntimeError(f"python {argv[0]} exited {done.returncode}:\n{done.stderr.decode()}")


def save_in_fresh_process(straight: Path, loop: Path) -> None:
    """`templates.save_templates` in a fresh process: TensorFlow stays out of this one."""
    run_fresh_python(["-m", "benchmarks.templates", str(straight), str(loop)])


def template_dir(
    cache: Path,
    template: Template,
    save: Callable[[Path, Path], None] = save_in_fresh_process,
) -> Path:
    """The template SavedModel, written on first use by `save(straight, loop)` (in a fresh
    process by default; the tests call `templates.save_templates`, in theirs)."""
    version = importlib.metadata.version("tensorflow")
    # A changed template is a new one: a hash of its source is part of the folder's name.
    folder = cache / f"templates-tf{version}-{source_hash(Path(templates.__file__))}"
    if not all((folder / t.value / "saved_model.pb").is_file() for t in Template):
        folder.parent.mkdir(parents=True, exist_ok=True)
        # Written beside, then renamed: a concurrent or interrupted run never sees half of it.
        scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".templates-"))
        try:
            save(scratch / Template.STRAIGHT.value, scratch / Template.LOOP.value)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(scratch, folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return folder / template.value


def write(
    shape: Shape,
    ops: int,
    out_dir: Path,
    cache: Path | None = None,
    save: Callable[[Path, Path], None] = save_in_fresh_process,
) -> Path:
    """Write a SavedModel whose `loss` has about `ops` ops in `shape` to `out_dir`; returns its
    saved_model.pb. The templates are kept in `cache` (`template_dir`)."""
    template = template_dir(cache or default_cache(), _TEMPLATE_OF[shape], save)
    saved_model = protos().saved_model_pb2.SavedModel()
    saved_model.ParseFromString((template / "saved_model.pb").read_bytes())
    library = saved_model.meta_graphs[0].graph_def.library
    spliced = _function_holding_splice(library)
    _GENERATORS[shape](spliced, library, max(ops, 1))
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template / "variables", out_dir / "variables", dirs_exist_ok=True)
    path = out_dir / "saved_model.pb"
    path.write_bytes(saved_model.SerializeToString())
    return path


def _function_holding_splice(library: Any) -> Any:
    for function in library.function:
        if any(node.name.endswith("splice") for node in function.node_def):
            return function
    raise RuntimeError("the template has no `splice` node")


class _Splice:
    """The splice point of one FunctionDef and the names the generated ops need."""

    def __init__(self, function: Any) -> None:
        self.function = function
        nodes = {node.name: node for node in function.node_def}
        self.node = next(n for n in function.node_def if n.name.endswith("splice"))
        self.prefix = self.node.name.removesuffix("splice")
        self.start = self.node.input[0]
        self.alive_ref = f"{self.prefix}alive_value:output:0"
        self.x_ref = f"{self.prefix}x_value:output:0"
        # The straight loss reads `alive`; the loop's body gets its value as an argument.
        read = nodes.get(nodes[self.prefix + "alive_value"].input[0].split(":")[0])
        self.resource = read.input[0] if read and read.op == "ReadVariableOp" else None
        self.float_type = self.node.attr["T"].type

    def add(self, op: str, name: str, inputs: list[str]) -> str:
        """Add a node; returns its first output's reference."""
        node = self.function.node_def.add()
        node.name = self.prefix + name
        node.op = op
        node.input.extend(inputs)
        if op == "ReadVariableOp":
            node.attr["dtype"].type = self.float_type
        elif not op.endswith("PartitionedCall"):
            node.attr["T"].type = self.float_type
        return f"{node.name}:{_OUTPUT_ARG.get(op, 'output')}:0"

    def finish(self, end: str) -> None:
        self.node.input[0] = end


def _generate_chain(function: Any, library: Any, ops: int) -> None:
    splice = _Splice(function)
    h = splice.start
    for index in range(ops):
        op = _CHAIN_OPS[index % len(_CHAIN_OPS)]
        second = {"Mul": [splice.x_ref], "AddV2": [splice.alive_ref]}.get(op, [])
        h = splice.add(op, f"chain_{index}", [h, *second])
    splice.finish(h)


def _generate_tree(function: Any, library: Any, ops: int) -> None:
    splice = _Splice(function)
    assert splice.resource is not None
    leaves = [splice.start]
    for index in range(max(ops // 3, 1)):  # a read and a Mul per leaf, an AddV2 per inner node
        read = splice.add("ReadVariableOp", f"leaf_{index}/read", [splice.resource])
        leaves.append(splice.add("Mul", f"leaf_{index}", [read, splice.x_ref]))
    level = 0
    while len(leaves) > 1:
        pairs = [leaves[i : i + 2] for i in range(0, len(leaves), 2)]
        leaves = [
            pair[0] if len(pair) == 1 else splice.add("AddV2", f"sum_{level}_{i}", pair)
            for i, pair in enumerate(pairs)
        ]
        level += 1
    splice.finish(leaves[0])


def _generate_calls(function: Any, library: Any, ops: int) -> None:
    splice = _Splice(function)
    count = max(ops // (_OPS_PER_FUNCTION + 1), 1)  # own ops plus the call that calls it
    names = [f"synthetic_call_{index}" for index in range(count)]
    float_type = splice.float_type
    for index, name in enumerate(names):
        callees = [
            names[child]
            for child in range(_CALL_BRANCHING * index + 1, _CALL_BRANCHING * index + 5)
            if child < count
        ]
        _add_function(library, name, float_type, _calls_body(callees, float_type))
    arguments = [splice.start, splice.x_ref, splice.alive_ref]
    end = splice.add("StatefulPartitionedCall", "call_tree", arguments)
    _set_call_attrs(_node(function, "call_tree"), names[0], float_type, inputs=3)
    splice.finish(end)
    _nest_stop_gradient(function, library, float_type)


def _calls_body(callees: list[str], float_type: int) -> Iterator[tuple[str, str, list[str], str]]:
    """(op, name, inputs, callee) of one function of the call tree: (h, x, alive) -> h, the
    chain's ops before and after its calls."""
    half = _OPS_PER_FUNCTION // 2
    h = "h"
    for index in range(_OPS_PER_FUNCTION):
        if index == half:
            for number, callee in enumerate(callees):
                op = "PartitionedCall" if number % 2 else "StatefulPartitionedCall"
                yield op, f"call_{number}", [h, "x", "alive"], callee
                h = f"call_{number}:output:0"
        op = _CHAIN_OPS[index % len(_CHAIN_OPS)]
        second = {"Mul": ["x"], "AddV2": ["alive"]}.get(op, [])
        yield op, f"op_{index}", [h, *second], ""
        h = f"op_{index}:{_OUTPUT_ARG[op]}:0"
    yield "Identity", "result", [h], ""


def _add_function(
    library: Any, name: str, float_type: int, body: Iterator[tuple[str, str, list[str], str]]
) -> None:
    """A library function of float arguments (some of h, x, alive) returning float `result`."""
    function = library.function.add()
    function.signature.name = name
    nodes = list(body)
    arguments = sorted(
        {i for _, _, inputs, _ in nodes for i in inputs if ":" not in i},
        key=["h", "x", "alive"].index,
    )
    for argument in arguments:
        arg = function.signature.input_arg.add()
        arg.name, arg.type = argument, float_type
    output = function.signature.output_arg.add()
    output.name, output.type = "result", float_type
    for op, node_name, inputs, callee in nodes:
        node = function.node_def.add()
        node.name, node.op = node_name, op
        node.input.extend(inputs)
        if callee:
            _set_call_attrs(node, callee, float_type, inputs=len(inputs))
        else:
            node.attr["T"].type = float_type
    function.ret["result"] = "result:output:0"


def _set_call_attrs(node: Any, callee: str, float_type: int, inputs: int) -> None:
    node.attr["f"].func.name = callee
    node.attr["Tin"].list.type.extend([float_type] * inputs)
    node.attr["Tout"].list.type.append(float_type)
    if node.op == "StatefulPartitionedCall":
        for key in ("config", "config_proto", "executor_type"):
            node.attr[key].s = b""


def _nest_stop_gradient(function: Any, library: Any, float_type: int) -> None:
    """Move the loss's `tf.stop_gradient` two calls deep: the StopGradient node becomes an
    Identity of `stop_outer(v)`, which calls `stop_inner(v)`, which stops the gradient."""
    _add_function(
        library,
        "synthetic_stop_inner",
        float_type,
        iter([("StopGradient", "stop", ["h"], ""), ("Identity", "result", ["stop:output:0"], "")]),
    )
    _add_function(
        library,
        "synthetic_stop_outer",
        float_type,
        iter(
            [
                ("PartitionedCall", "call", ["h"], "synthetic_stop_inner"),
                ("Identity", "result", ["call:output:0"], ""),
            ]
        ),
    )
    stop = next(node for node in function.node_def if node.op == "StopGradient")
    call = function.node_def.add()
    call.name, call.op = "stop_call", "PartitionedCall"
    call.input.append(stop.input[0])
    _set_call_attrs(call, "synthetic_stop_outer", float_type, inputs=1)
    stop.op = "Identity"  # its output is also named `output`: its consumers stay valid
    stop.input[0] = "stop_call:output:0"


def _node(function: Any, name: str) -> Any:
    return next(node for node in function.node_def if node.name == name)


_GENERATORS = {
    Shape.CHAIN: _generate_chain,
    Shape.TREE: _generate_tree,
    Shape.CALLS: _generate_calls,
    Shape.WHILE: _generate_chain,  # the loop template's splice point is in the body
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=Shape, choices=list(Shape), required=True)
    parser.add_argument("--ops", type=int, required=True, help="about how many ops the loss has")
    parser.add_argument("--cache", type=Path, default=None, help="where the templates are kept")
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    path = write(args.shape, args.ops, args.out_dir, args.cache)
    print(f"{path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
