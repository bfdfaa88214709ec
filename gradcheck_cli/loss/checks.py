"""Refuse a loss that is no value (a resource handle) or not a scalar, before any verdict is
drawn from it. A value of a dtype without gradient (an int32 rank, a bool) is a loss to check:
TensorFlow gives every variable None for it."""

from __future__ import annotations

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import Program


def validate_loss(program: Program, name: str, *, sum_loss: bool = False) -> None:
    dtype = program.top_body.input_dtype(program.loss)
    if dtype == "resource":
        raise GradcheckError(
            f"the loss {name!r} is a resource handle (a variable itself), not a value; return "
            "the value computed from it"
        )
    shape = program.loss_shape
    if shape is None or sum_loss or all(dim == 1 for dim in shape):
        return
    shown = "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
    raise GradcheckError(
        f"the loss {name!r} has shape {shown}, not a scalar; reduce it in the model "
        "(tf.reduce_mean), or pass --sum-loss to check its sum, as tf.gradients would"
    )
