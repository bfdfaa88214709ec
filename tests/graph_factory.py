"""A small builder for hand-made graph models, so analysis tests need no TensorFlow."""

from __future__ import annotations

from gradcheck_cli.graph.model import (
    ARG_OP,
    CONSTANT_ATTR,
    Body,
    Constant,
    Node,
    Program,
    TensorRef,
    Variable,
)


class BodyFactory:
    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: dict[str, Node] = {}
        self.args: list[str] = []

    def arg(self, name: str, dtype: str = "float32") -> TensorRef:
        self.nodes[name] = Node(name, ARG_OP, output_dtypes=(dtype,))
        self.args.append(name)
        return TensorRef(name)

    def op(
        self,
        name: str,
        op_type: str,
        *inputs: TensorRef,
        dtypes: tuple[str, ...] = ("float32",),
        attrs: dict[str, object] | None = None,
        **calls: tuple[str, ...],
    ) -> TensorRef:
        self.nodes[name] = Node(
            name, op_type, tuple(inputs), dtypes, calls=dict(calls), attrs=dict(attrs or {})
        )
        return TensorRef(name)

    def const(
        self,
        name: str,
        shape: tuple[int, ...],
        *elements: float | int | bool,
        dtype: str = "float32",
    ) -> TensorRef:
        """A Const node whose value the graph model keeps (as a loader keeps small ones)."""
        value = Constant(shape, tuple(elements))
        return self.op(name, "Const", dtypes=(dtype,), attrs={CONSTANT_ATTR: value})

    def body(self, *rets: TensorRef) -> Body:
        return Body(self.name, self.nodes, tuple(self.args), tuple(rets))


def program(
    top: Body, loss: TensorRef, *others: Body, trainable: dict[str, bool] | None = None
) -> Program:
    """Every `_Arg` of the top body is a variable of that name."""
    trainable = trainable or {}
    variables = [
        Variable(arg, trainable.get(arg, True), "float32", (), TensorRef(arg)) for arg in top.args
    ]
    bodies = {b.name: b for b in (top, *others)}
    return Program(bodies=bodies, top=top.name, loss=loss, variables=variables)
