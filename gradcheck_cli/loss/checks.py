"""Refuse a loss that is not a float scalar, before any verdict is drawn from it."""

from __future__ import annotations

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import Program, is_trainable_dtype


def validate_loss(program: Program, name: str, *, sum_loss: bool = False) -> None:
    dtype = program.top_body.input_dtype(program.loss)
    if dtype is not None and (dtype == "resource" or not is_trainable_dtype(dtype)):
        raise GradcheckError(
            f"the loss {name!r} is a {dtype} tensor; only a floating-point loss has gradients"
        )
    shape = program.loss_shape
    if shape is None or sum_loss or all(dim == 1 for dim in shape):
        return
    shown = "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
    raise GradcheckError(
        f"the loss {name!r} has shape {shown}, not a scalar; reduce it in the model "
        "(tf.reduce_mean), or pass --sum-loss to check its sum, as tf.gradients would"
    )
