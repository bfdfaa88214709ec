"""Load a SavedModel directory from its protos alone: no variable values, no TensorFlow runtime."""

from __future__ import annotations

import stat
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.graph.model import (
    TF1_TOP,
    GraphKind,
    Program,
    TensorRef,
    Variable,
    make_names_unique,
)
from gradcheck_cli.graph.progress import Progress, silent
from gradcheck_cli.loss.checks import validate_loss
from gradcheck_cli.loss.names import (
    ambiguous_name,
    keyed_matches,
    resolve_loss_name,
)
from gradcheck_cli.protos.descriptors import messages
from gradcheck_cli.protos.graph_builder import GraphBuilder
from gradcheck_cli.protos.limits import ExpansionBudget, Refused, malformed, shape_dims
from gradcheck_cli.protos.op_defs import merged_op_defs
from gradcheck_cli.protos.tf_protos import dtype_name, node_name, protos
from gradcheck_cli.savedmodel.custom_gradients import saved_custom_gradients
from gradcheck_cli.savedmodel.structured_values import flat_outputs, output_shape
from gradcheck_cli.savedmodel.variable_lists import (
    ListedCopies,
    in_variable_list,
    listed_trainable,
)
from gradcheck_cli.savedmodel.variable_names import name_saved_variables
from gradcheck_cli.source_code.debug_info import DebugInfoLocations
from gradcheck_cli.source_code.files import bounded_text

_SKIPPED_SIGNATURES = frozenset({"__saved_model_init_op", "__saved_model_train_op"})
_FUNCTION_KINDS = frozenset({"function", "bare_concrete_function"})
_WHAT = "SavedModel"


@dataclass
class _Candidate:
    """A loss the user can name: a function output or a signature output."""

    concrete_function: str | None  # TF2: the FunctionDef that computes it
    ret_index: int  # which output of that function
    tensor: str | None = None  # TF1: the tensor name in the graph
    shape: tuple[int | None, ...] | None = None  # TF1: the signature's static shape


def is_saved_model(path: Path) -> bool:
    return path.is_dir() and any(
        (path / name).is_file()
        for name in ("saved_model.pb", "saved_model.pbtxt", "saved_model.cpb")
    )


# Keras 2 writes its model's config, compiled loss included, beside saved_model.pb.
_KERAS_METADATA = "keras_metadata.pb"
_KERAS_METADATA_BYTES = 64 * 1024 * 1024


def compiled_by_keras_2(path: Path) -> bool:
    """Whether the SavedModel at `path` is a compiled Keras 2 model (tf_keras's `model.save`):
    its training objective is then the compiled loss Keras 2 wrote down, which the graph does
    not hold. A metadata file too large to be one is not read."""
    text = bounded_text(str(path / _KERAS_METADATA), _KERAS_METADATA_BYTES)
    return text is not None and '"training_config"' in text


def load_saved_model(
    path: Path, loss: str | None, *, sum_loss: bool = False, progress: Progress = silent
) -> tuple[Program, str]:
    """The program of the loss `loss` in the SavedModel at `path`, and the loss's full name;
    `progress` hears each step (reading the file, building the graph model)."""
    saved_model, size = _parse(path, progress)
    budget = ExpansionBudget(size, "saved_model.pb")
    if not saved_model.meta_graphs:
        raise GradcheckError(f"{path} holds no MetaGraph")
    meta_graph = _serving_meta_graph(saved_model)
    library = meta_graph.graph_def.library
    functions = {f.signature.name: f for f in library.function}
    locations = _debug_locations(path, size)
    builder = GraphBuilder(
        functions,
        merged_op_defs(meta_graph.meta_info_def.stripped_op_list.op),
        locations,
        budget=budget,
        what=_WHAT,
        progress=progress,
    )
    object_graph = meta_graph.object_graph_def
    if object_graph.nodes:
        text = ExpansionBudget.of_text(size, "saved_model.pb")
        objects = _read_objects(object_graph)
        paths = _object_paths(objects.children, text)
        candidates = _tf2_candidates(meta_graph, paths, objects.kinds, text)
        name = resolve_loss_name(loss, candidates, what=f"SavedModel {display_path(path)}")
        chosen = candidates[name]
        assert chosen.concrete_function is not None
        program = _tf2_program(meta_graph, builder, chosen, paths, objects, functions)
    else:
        candidates = _tf1_candidates(meta_graph)
        name = _tf1_loss_name(loss, candidates, meta_graph, path)
        chosen = candidates[name]
        program = _tf1_program(meta_graph, builder, chosen)
    program.notes.extend(builder.notes)
    program.located = locations is not None
    validate_loss(program, name, sum_loss=sum_loss)
    return program, name


# -- parsing ------------------------------------------------------------------------------------


# Protocol buffers cannot hold a message of 2 GiB or more: a file that large is refused from its
# size, before a byte of it is read (a sparse file costs nothing to make).
MAX_PROTO_BYTES = 2**31 - 1


def _sized(file: Path, what: str) -> int:
    """The size of `file`, a regular file under MAX_PROTO_BYTES; else one clear refusal."""
    try:
        info = file.stat()
    except OSError as error:
        raise GradcheckError(f"cannot read {file}: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise GradcheckError(f"{file} is not a regular file")
    if info.st_size > MAX_PROTO_BYTES:
        raise GradcheckError(
            f"{file} is {info.st_size / 2**30:.1f} GiB: a {what} of 2 GiB or more cannot be a "
            "protocol buffer (TensorFlow saves such models chunked, as saved_model.cpb)"
        )
    return info.st_size


def _parse(path: Path, progress: Progress) -> tuple[Any, int]:
    binary = path / "saved_model.pb"
    if binary.exists():
        _sized(binary, "saved_model.pb")
        progress("reading saved_model.pb")
    elif (path / "saved_model.pbtxt").exists():
        _sized(path / "saved_model.pbtxt", "saved_model.pbtxt")
        progress("reading saved_model.pbtxt")
    if not binary.is_file() and (path / "saved_model.cpb").is_file():
        raise GradcheckError(
            f"{path} is a chunked SavedModel (saved_model.cpb, the format for models over 2 GiB), "
            "which gradcheck cannot read yet; check the script that builds the model instead"
        )
    try:
        if binary.is_file():
            data = binary.read_bytes()
            saved_model = messages().SavedModel()
            saved_model.ParseFromString(data)
        else:
            from google.protobuf import text_format

            saved_model = protos().saved_model_pb2.SavedModel()
            text = (path / "saved_model.pbtxt").read_text()
            text_format.Parse(text, saved_model)
            data = text.encode()
    except Exception as error:  # protobuf raises DecodeError, ParseError, RuntimeWarning...
        raise GradcheckError(f"{path} is not a readable SavedModel: {error}") from None
    return saved_model, len(data)


def _serving_meta_graph(saved_model: Any) -> Any:
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return meta_graph
    return saved_model.meta_graphs[0]


# A debug info file holds a stack of lines per op of the graph: this many bytes per byte of
# saved_model.pb (and this many more) is far beyond TensorFlow's own (about one to one).
DEBUG_INFO_BYTES_PER_GRAPH_BYTE = 64
DEBUG_INFO_BASE_BYTES = 64 * 2**20


def _debug_locations(path: Path, graph_bytes: int) -> DebugInfoLocations | None:
    """The source lines of the graph's ops; None (no lines) when there is no debug info, or
    one larger than a graph of `graph_bytes` can have (a sparse 1 GiB file costs nothing to
    make and 1 GB to read): only source lines depend on it."""
    debug_file = path / "debug" / "saved_model_debug_info.pb"
    if not debug_file.is_file():
        return None
    bound = DEBUG_INFO_BASE_BYTES + DEBUG_INFO_BYTES_PER_GRAPH_BYTE * graph_bytes
    try:
        if debug_file.stat().st_size > min(bound, MAX_PROTO_BYTES):
            return None
    except OSError:
        return None
    info = messages().GraphDebugInfo()
    try:
        info.ParseFromString(debug_file.read_bytes())
    except Exception:
        return None
    return DebugInfoLocations(info)


# -- TF2: object graph --------------------------------------------------------------------------


class _Objects(NamedTuple):
    """The object graph's nodes as plain lists, read from the proto once for the walks over
    them (paths, loss candidates and variables here, Keras owners in `variable_names`)."""

    children: list[list[tuple[int, str]]]  # each node's (child node id, attribute name)
    kinds: list[str | None]  # each node's kind: "variable", "function", "user_object"...


def _read_objects(object_graph: Any) -> _Objects:
    objects = _Objects([], [])
    for node in object_graph.nodes:
        objects.children.append([(child.node_id, child.local_name) for child in node.children])
        objects.kinds.append(node.WhichOneof("kind"))
    return objects


def _object_paths(children: list[list[tuple[int, str]]], budget: ExpansionBudget) -> dict[int, str]:
    """Node id -> attribute path from the root ("model.dense.kernel"), shortest first."""
    paths = {0: ""}
    count = len(children)
    queue = deque([0])
    while queue:
        node_id = queue.popleft()
        parent = paths[node_id]
        for child_id, local_name in children[node_id]:
            if not 0 <= child_id < count:
                raise GradcheckError(
                    f"the SavedModel is malformed: object {local_name!r} points at "
                    f"node {child_id}, which does not exist"
                )
            if child_id not in paths:
                # A deep chain of objects makes paths quadratic in the chain's length.
                path = f"{parent}.{local_name}" if parent else local_name
                try:
                    budget.spend(len(path), f"has a path of {len(path)} characters")
                except Refused as refused:
                    raise malformed(_WHAT, f"object {child_id}", refused) from None
                paths[child_id] = path
                queue.append(child_id)
    return paths


def _tf2_candidates(
    meta_graph: Any, paths: dict[int, str], kinds: list[str | None], budget: ExpansionBudget
) -> dict[str, _Candidate]:
    object_graph = meta_graph.object_graph_def
    candidates: dict[str, _Candidate] = {}
    callables = [item for item in paths.items() if kinds[item[0]] in _FUNCTION_KINDS]
    for node_id, path in sorted(callables, key=lambda item: (item[1].count("."), item[1])):
        node = object_graph.nodes[node_id]
        kind = kinds[node_id]
        if kind == "function" and node.function.concrete_functions:
            names = [node.function.concrete_functions[0]]
        elif kind == "bare_concrete_function":
            names = [node.bare_concrete_function.concrete_function_name]
        else:
            continue
        if not path or path.split(".")[-1].startswith("_"):
            continue
        concrete = names[0]
        saved = object_graph.concrete_functions.get(concrete)
        display = path.removeprefix("signatures.")
        with _refusing(f"object {path!r}"):
            outputs = flat_outputs(saved.output_signature, budget) if saved is not None else [""]
            # Each output is a candidate named "path:key": the path is copied into every name.
            budget.spend(len(outputs) * (len(display) + 1), "names too many loss candidates")
        for index, key in enumerate(outputs):
            name = display if len(outputs) == 1 or not key else f"{display}:{key}"
            candidates.setdefault(name, _Candidate(concrete, index))
        if len(outputs) > 1 and "loss" in outputs:
            candidates.setdefault(display, _Candidate(concrete, outputs.index("loss")))
    return candidates


def _tf2_program(
    meta_graph: Any,
    builder: GraphBuilder,
    chosen: _Candidate,
    paths: dict[int, str],
    objects: _Objects,
    functions: Mapping[str, Any],
) -> Program:
    object_graph = meta_graph.object_graph_def
    concrete = chosen.concrete_function
    assert concrete is not None
    top = builder.add_function(concrete)
    saved = object_graph.concrete_functions[concrete]
    bound = list(saved.bound_inputs)
    captured_args = top.args[len(top.args) - len(bound) :] if bound else ()
    source_of = {node_id: TensorRef(arg, 0) for node_id, arg in zip(bound, captured_args)}
    variables: list[Variable] = []
    copies = ListedCopies()
    with _refusing("the list of trainable variables"):
        listed = listed_trainable(object_graph)
    node_of: dict[int, int] = {}
    nodes = object_graph.nodes
    for node_id, kind in enumerate(objects.kinds):
        if kind != "variable":
            continue
        saved_variable = nodes[node_id].variable
        with _refusing(f"variable {saved_variable.name or node_id!r}"):
            shape = shape_dims(saved_variable.shape)
            dtype = dtype_name(saved_variable.dtype)
        key = (saved_variable.name, saved_variable.dtype, str(shape))
        source = source_of.get(node_id)
        path = paths.get(node_id) or None
        listing = path.partition(".")[0] if in_variable_list(path) else None
        twin = copies.twin(key, listing) if listing is not None else None
        if twin is not None:
            kept = variables[twin]
            if kept.source is None and source is not None:
                kept.source = source
            continue
        if listing is not None:
            copies.keep(key, listing, len(variables))
        elif path is not None:
            node_of[len(variables)] = node_id
        variables.append(
            Variable(
                name=saved_variable.name or path or f"variable_{node_id}",
                trainable=saved_variable.trainable if listed is None else key in listed,
                dtype=dtype,
                shape=shape,
                source=source,
                path=path,
            )
        )
    name_saved_variables(variables, meta_graph, node_of, objects.children, functions)
    make_names_unique(variables)
    custom = saved_custom_gradients(meta_graph, builder)
    if chosen.ret_index >= len(top.rets):
        raise malformed(
            _WHAT,
            f"function {concrete!r}",
            f"returns {len(top.rets)} outputs, but its output signature lists more",
        )
    with _refusing(f"the output signature of function {concrete!r}"):
        loss_shape = output_shape(saved, chosen.ret_index)
    return Program(
        bodies=builder.bodies,
        top=concrete,
        loss=top.rets[chosen.ret_index],
        loss_shape=loss_shape,
        variables=variables,
        custom_gradients=custom,
        inputs=len(top.args) - len(bound),
    )


@contextmanager
def _refusing(where: str) -> Iterator[None]:
    """Name the element of the SavedModel in a refusal raised while reading it."""
    try:
        yield
    except Refused as refused:
        raise malformed(_WHAT, where, refused) from None


# -- TF1: signatures over a GraphDef --------------------------------------------------------------


def _tf1_candidates(meta_graph: Any) -> dict[str, _Candidate]:
    candidates: dict[str, _Candidate] = {}
    for signature_name in sorted(meta_graph.signature_def):
        if signature_name in _SKIPPED_SIGNATURES:
            continue
        outputs = meta_graph.signature_def[signature_name].outputs
        for key in sorted(outputs):
            tensor = outputs[key].name
            with _refusing(f"output {key!r} of signature {signature_name!r}"):
                shape = shape_dims(outputs[key].tensor_shape)
            candidates[f"{signature_name}:{key}"] = _Candidate(None, 0, tensor, shape)
            if len(outputs) == 1:
                candidates[signature_name] = _Candidate(None, 0, tensor, shape)
    losses = meta_graph.collection_def.get("losses")
    if losses is not None:
        for tensor in losses.node_list.value:
            candidates.setdefault(tensor.split(":")[0], _Candidate(None, 0, tensor))
    return candidates


def _tf1_loss_name(
    loss: str | None, candidates: dict[str, _Candidate], meta_graph: Any, path: Path
) -> str:
    if loss is not None and loss not in candidates:
        tensor = _tf1_tensor_named(loss, candidates, meta_graph, f"SavedModel {path}")
        if tensor is not None:
            candidates[loss] = _Candidate(None, 0, tensor)
    return resolve_loss_name(loss, candidates, what=f"SavedModel {display_path(path)}")


def _tf1_tensor_named(
    loss: str, candidates: dict[str, _Candidate], meta_graph: Any, what: str
) -> str | None:
    """The tensor a TF1 graph answers to under `loss`: a node's name ("loss", "loss:0",
    "scope/loss"), or the last part of exactly one node's scoped name ("loss" for
    "train/loss"), unless a signature output key already names it."""
    wanted, colon, _ = loss.partition(":")
    node_names = {node_name(node, _WHAT) for node in meta_graph.graph_def.node}
    if wanted in node_names:
        return loss if colon else f"{loss}:0"
    if colon or keyed_matches(loss, candidates):
        return None
    scoped = sorted(name for name in node_names if name.endswith(f"/{loss}"))
    if len(scoped) > 1:
        raise ambiguous_name(loss, scoped, "tensors", what=what)
    return f"{scoped[0]}:0" if scoped else None


def _tf1_program(meta_graph: Any, builder: GraphBuilder, chosen: _Candidate) -> Program:
    assert chosen.tensor is not None
    node, _, index = chosen.tensor.partition(":")
    if not node or index and not (index.isascii() and index.isdigit()):
        raise malformed(_WHAT, f"the loss tensor {chosen.tensor!r}", "is not a tensor name")
    loss = TensorRef(node, int(index) if index else 0)
    body = builder.add_graph(meta_graph.graph_def, TF1_TOP, loss)
    variable_def = messages().VariableDef
    trainable_names: set[str] = set()
    variables: list[Variable] = []
    for collection, trainable in (("trainable_variables", True), ("variables", False)):
        entry = meta_graph.collection_def.get(collection)
        if entry is None:
            continue
        for raw in entry.bytes_list.value:
            definition = variable_def()
            try:
                definition.ParseFromString(raw)
            except Exception:  # protobuf's DecodeError, and anything else a bad proto raises
                raise malformed(
                    _WHAT, f"collection {collection!r}", "holds an unreadable VariableDef"
                ) from None
            name = definition.variable_name.split(":")[0]
            if name in trainable_names or any(v.name == name for v in variables):
                continue
            if trainable:
                trainable_names.add(name)
            producer = body.nodes.get(name)
            dtype = producer.output_dtypes[0] if producer and producer.output_dtypes else None
            variables.append(
                Variable(
                    name=name,
                    trainable=trainable,
                    dtype=dtype.removesuffix("_ref") if dtype else None,
                    shape=None,
                    source=TensorRef(name, 0) if producer else None,
                    location=producer.location if producer else None,
                )
            )
    return Program(
        bodies=builder.bodies,
        top=TF1_TOP,
        loss=loss,
        variables=variables,
        loss_shape=chosen.shape,
        kind=GraphKind.TF1_GRAPH,
    )
