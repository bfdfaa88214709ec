"""Record the ops an eager GradientTape step runs, and rebuild them as a GraphDef."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.tracing.keras_operations import replaying_now
from gradcheck_cli.tracing.leaving_tensorflow import EagerReads
from gradcheck_cli.tracing.traced import function_graphs, user_location

# A step that runs more ops than this is not rebuilt: its request keeps TensorFlow's verdict.
MAX_OPS = 200_000


@dataclass(frozen=True)
class RecordedOp:
    """One op TensorFlow ran eagerly; its tensors are kept alive so that their ids stay theirs."""

    op_type: str
    attrs: tuple[Any, ...]  # name, value, name, value, ... as the eager executor got them
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    location: SourceLocation | None


@dataclass
class EagerStep:
    """The recorded ops of one tape as a GraphDef whose loss is the tape's target."""

    graph_def: Any
    loss_tensor: str
    loss_shape: tuple[int | None, ...] | None
    handle_nodes: dict[int, str]  # id(a variable's resource handle) -> its Placeholder node
    locations: dict[str, SourceLocation]  # "node@" for the top graph's nodes
    graphs: list[tuple[str, Any]]  # (function name, FuncGraph) of the functions it called


@dataclass
class OpRecorder:
    """Records eager ops while a GradientTape is open and gradcheck itself is not busy."""

    busy: Callable[[], bool]
    ops: list[RecordedOp] = field(default_factory=list)
    functions: dict[str, Any] = field(default_factory=dict)  # function name -> FuncGraph
    overflowed: bool = False
    _open: int = 0  # tapes entered and not exited
    _generation: int = 0  # a new outermost tape starts a new recording

    _reads: EagerReads | None = None

    def watch_reads(self, reads: EagerReads) -> None:
        """Record into `reads` every eager read of a variable, and what is computed from it,
        until `close`: a value computed before a tape opened, or before a step was traced."""
        from tensorflow.python.framework import op_callbacks

        if self._reads is None:
            op_callbacks.add_op_callback(reads.on_op)
            self._reads = reads

    def tape_entered(self) -> tuple[int, int]:
        """Start (or go on) recording; the mark to give `ops_since` at the tape's request."""
        from tensorflow.python.framework import op_callbacks

        if self._open == 0:
            self._generation += 1
            self.ops = []
            self.functions = {}
            self.overflowed = False
            op_callbacks.add_op_callback(self._on_op)
        self._open += 1
        return self._generation, len(self.ops)

    def tape_exited(self) -> None:
        if self._open == 0:
            return
        self._open -= 1
        if self._open == 0:
            self.stop()

    def stop(self) -> None:
        from tensorflow.python.framework import op_callbacks

        try:
            op_callbacks.remove_op_callback(self._on_op)
        except KeyError:  # never added, or already removed
            pass
        self._open = 0

    def close(self) -> None:
        """Stop, and let go of the recorded tensors and reads."""
        from tensorflow.python.framework import op_callbacks

        self.stop()
        self.ops = []
        self.functions = {}
        if self._reads is not None:
            with contextlib.suppress(KeyError):
                op_callbacks.remove_op_callback(self._reads.on_op)
            self._reads = None

    def function_called(self, function: Any) -> None:
        """A tf.function's graph, kept for the source lines of its ops."""
        if self._open and not self.busy():
            name = function.name
            self.functions[name.decode() if isinstance(name, bytes) else str(name)] = function.graph

    def ops_since(self, mark: tuple[int, int] | None) -> list[RecordedOp] | None:
        """The ops run since `mark`, or None when the recording did not keep them all."""
        if mark is None or self.overflowed or mark[0] != self._generation:
            return None
        return self.ops[mark[1] :]

    def _on_op(
        self,
        op_type: str,
        inputs: Any,
        attrs: Any,
        outputs: Any,
        op_name: str | None = None,
        graph: Any = None,
    ) -> None:
        if graph is not None or self.overflowed or self.busy():
            return None
        if len(self.ops) >= MAX_OPS:
            self.overflowed = True
            self.ops = []
            return None
        from tensorflow.python.util import tf_stack

        try:
            stack = tf_stack.extract_stack()
            location = replaying_now(stack) or user_location(stack)
            recorded = RecordedOp(
                op_type.decode() if isinstance(op_type, bytes) else str(op_type),
                tuple(attrs or ()),
                tuple(inputs or ()),
                tuple(outputs or ()),
                location,
            )
        except Exception:  # never fail the script's op: give up on rebuilding this step
            self.overflowed = True
            self.ops = []
            return None
        self.ops.append(recorded)
        return None


def rebuild(
    ops: list[RecordedOp],
    target: Any,
    handles: dict[int, str],
    functions: dict[str, Any],
    value_reads: dict[int, tuple[Any, str]] | None = None,
) -> EagerStep | None:
    """The GraphDef of `ops` with `target` as its loss, or None when it cannot be rebuilt.

    `handles` names each variable's resource handle (by id): its Placeholder stands for the
    variable. A tensor no recorded op produced (data, a constant, a value that came back from
    NumPy) becomes a Placeholder of its dtype and shape, except those in `value_reads` (by id:
    the variable's handle and name), values of a variable that TensorFlow's C fast path read
    without an op the recorder could see (`tf.matmul(x, w)`): those become a read of it.
    """
    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.framework import op_def_registry

    graph_def = graph_pb2.GraphDef()
    producers: dict[int, str] = {}
    handle_nodes: dict[int, str] = {}
    used: set[str] = set()
    locations: dict[str, SourceLocation] = {}
    called: list[str] = []
    for index, op in enumerate(ops):
        name = _unique(f"{_node_name(op.op_type)}_{index}", used)
        node = graph_def.node.add(name=name, op=op.op_type)
        op_def = op_def_registry.get(op.op_type)
        if op_def is None:
            called.append(op.op_type)
        else:
            _set_attrs(node, op_def, op.attrs)
        for tensor in op.inputs:
            read = (value_reads or {}).get(id(tensor))
            if id(tensor) not in producers and read is not None:
                handle, variable = read
                if id(handle) not in producers:
                    producers[id(handle)] = _placeholder(graph_def, handle, variable, used)
                    handle_nodes[id(handle)] = producers[id(handle)]
                value = graph_def.node.add(name=_unique(f"{_node_name(variable)}/read", used))
                value.op = "ReadVariableOp"
                value.input.append(producers[id(handle)])
                value.attr["dtype"].type = tensor.dtype.as_datatype_enum
                producers[id(tensor)] = value.name
            if id(tensor) not in producers:
                placeholder = _placeholder(graph_def, tensor, handles.get(id(tensor)), used)
                producers[id(tensor)] = placeholder
                if id(tensor) in handles:
                    handle_nodes[id(tensor)] = placeholder
            node.input.append(producers[id(tensor)])
        for position, tensor in enumerate(op.outputs):
            if id(tensor) in handles:
                # A variable created inside the tape (a model built by its first call): its
                # handle, made here, stands for the variable as a handle made before would.
                placeholder = _placeholder(graph_def, tensor, handles[id(tensor)], used)
                producers[id(tensor)] = handle_nodes[id(tensor)] = placeholder
                continue
            producers[id(tensor)] = name if position == 0 else f"{name}:{position}"
        if op.location is not None:
            locations[f"{name}@"] = op.location
    loss = producers.get(id(target))
    if loss is None:
        # A value the tape saw no op compute (`minimize(lambda: cost)` with `cost` computed
        # before): a constant to the tape, which reads no variable.
        loss = _placeholder(graph_def, target, None, used)
    if not _add_functions(graph_def, called):
        return None
    graphs: list[tuple[str, Any]] = []
    for fn_name, graph in functions.items():
        graphs.extend(function_graphs(graph, fn_name))
    shape = target.shape
    return EagerStep(
        graph_def=graph_def,
        loss_tensor=loss if ":" in loss else f"{loss}:0",
        loss_shape=None if shape.rank is None else tuple(shape.as_list()),
        handle_nodes=handle_nodes,
        locations=locations,
        graphs=graphs,
    )


def _node_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", text).lstrip("_-/.") or "node"


def _unique(name: str, used: set[str]) -> str:
    candidate, count = name, 0
    while candidate in used:
        count += 1
        candidate = f"{name}_{count}"
    used.add(candidate)
    return candidate


def _placeholder(graph_def: Any, tensor: Any, variable: str | None, used: set[str]) -> str:
    from tensorflow.python.framework import tensor_shape, tensor_util

    base = _node_name(variable) if variable is not None else "input"
    name = _unique(base, used)
    if variable is None and _scalar_number(tensor):
        # A number the step multiplies or adds (`loss * 0.0`, a weight): its value in this
        # step, so that a zero factor is seen as one. `_numpy` is not the user's `.numpy()`.
        node = graph_def.node.add(name=name, op="Const")
        node.attr["dtype"].type = tensor.dtype.as_datatype_enum
        node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(tensor._numpy()))
        return name
    node = graph_def.node.add(name=name, op="Placeholder")
    node.attr["dtype"].type = tensor.dtype.as_datatype_enum
    shape = tensor.shape if variable is None else tensor_shape.TensorShape([])
    node.attr["shape"].shape.CopyFrom(tensor_shape.TensorShape(shape).as_proto())
    return name


def _scalar_number(tensor: Any) -> bool:
    dtype = getattr(tensor, "dtype", None)
    if (
        dtype is None
        or not (dtype.is_floating or dtype.is_integer)
        or not hasattr(tensor, "_numpy")
    ):
        return False
    return tensor.shape.num_elements() == 1


def _set_attrs(node: Any, op_def: Any, attrs: tuple[Any, ...]) -> None:
    """The eager executor's attribute values as AttrValue protos, typed by the OpDef."""
    kinds = {attr.name: attr for attr in op_def.attr}
    for key, value in zip(attrs[::2], attrs[1::2]):
        attr = kinds.get(key)
        if attr is None or key in node.attr:
            continue
        try:
            _set_attr(node.attr[key], attr.type, value)
        except (TypeError, ValueError):
            del node.attr[key]
    for key, attr in kinds.items():
        if key not in node.attr and attr.HasField("default_value"):
            node.attr[key].CopyFrom(attr.default_value)


def _set_attr(proto: Any, kind: str, value: Any) -> None:
    from tensorflow.python.framework import dtypes, tensor_shape, tensor_util

    if kind == "type":
        proto.type = dtypes.as_dtype(value).as_datatype_enum
    elif kind == "int":
        proto.i = int(value)
    elif kind == "float":
        proto.f = float(value)
    elif kind == "bool":
        proto.b = bool(value)
    elif kind == "string":
        proto.s = value if isinstance(value, bytes) else str(value).encode()
    elif kind == "shape":
        proto.shape.CopyFrom(tensor_shape.TensorShape(value).as_proto())
    elif kind == "tensor":
        proto.tensor.CopyFrom(tensor_util.make_tensor_proto(value))
    elif kind == "func":
        proto.func.name = value if isinstance(value, str) else getattr(value, "name", str(value))
    elif kind == "list(type)":
        proto.list.type.extend(dtypes.as_dtype(v).as_datatype_enum for v in value)
    elif kind == "list(int)":
        proto.list.i.extend(int(v) for v in value)
    elif kind == "list(float)":
        proto.list.f.extend(float(v) for v in value)
    elif kind == "list(bool)":
        proto.list.b.extend(bool(v) for v in value)
    elif kind == "list(string)":
        proto.list.s.extend(v if isinstance(v, bytes) else str(v).encode() for v in value)
    elif kind == "list(shape)":
        proto.list.shape.extend(tensor_shape.TensorShape(v).as_proto() for v in value)
    else:
        raise ValueError(kind)


def _add_functions(graph_def: Any, called: list[str]) -> bool:
    """Put each called function, and every function it calls, in the GraphDef's library."""
    from tensorflow.python.eager import context
    from tensorflow.python.framework import op_def_registry

    pending, seen = list(called), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            fdef = context.context().get_function_def(name)
        except Exception:  # not a function TensorFlow knows: an op this build does not register
            return False
        graph_def.library.function.add().CopyFrom(fdef)
        for node in fdef.node_def:
            if op_def_registry.get(node.op) is None:
                pending.append(node.op)
            for value in node.attr.values():
                if value.HasField("func"):
                    pending.append(value.func.name)
                elif value.HasField("list"):
                    pending.extend(f.name for f in value.list.func)
    return True
