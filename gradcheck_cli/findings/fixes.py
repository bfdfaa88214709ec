"""The fix for each kind of cut, as code the user can paste, with their own names."""

from __future__ import annotations

from gradcheck_cli.analysis.verdicts import Blocker, Unreached, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.source import SourceLines, assigned_name, assignment

# Ops that transform values (quantize, round, flip bits): the straight-through estimator keeps
# the transformed value forward and passes the gradient through unchanged backward.
_TRANSFORMS = frozenset(
    {
        "Cast",
        "Round",
        "Floor",
        "Ceil",
        "Rint",
        "FloorDiv",
        "TruncateDiv",
        "BitwiseXor",
        "BitwiseAnd",
        "BitwiseOr",
        "Invert",
        "LeftShift",
        "RightShift",
        "StopGradient",
        "FakeQuantWithMinMaxArgs",
        "Sign",
    }
)
_SELECTIONS = frozenset({"ArgMax", "ArgMin"})


def python_name(verdict: VariableVerdict, source: SourceLines) -> str:
    """The name the user's code gives the variable, or the last part of its TensorFlow name."""
    return assigned_name(source.line(verdict.location)) or verdict.name.split("/")[-1]


def variable_fix(verdict: VariableVerdict, source: SourceLines) -> str:
    """What to write instead, for a dead variable as a whole."""
    name = python_name(verdict, source)
    if not verdict.blockers:
        owner = verdict.name.split("/")[-2] if verdict.name.count("/") >= 1 else None
        read = verdict.read_before_tracing
        if verdict.unreached is Unreached.FROZEN_BEFORE_TRACING and read is not None:
            return (
                f"compute the value from {name} inside the loss function (move line "
                f"{read.line} into it), so that every call reads {name} itself"
            )
        if owner is not None and verdict.unreached is Unreached.READ_NOT_REACHING:
            return (
                f"nothing the loss uses depends on layer {owner}'s output: give that output a "
                f"loss (compile(loss={{...}})) or remove the layer; if it is meant to stay "
                "untrained, set its trainable attribute to False"
            )
        attribute = assigned_name(source.line(verdict.location))
        if owner is not None and attribute is not None and verdict.path not in (None, verdict.name):
            return (
                f"call {attribute} in the forward pass, or delete it; if it is meant to stay "
                f"untrained, set {attribute}.trainable = False"
            )
        if owner is not None and attribute is None:
            return (
                f"call the layer {owner} in the forward pass, or delete it; if it is meant to "
                "stay untrained, set its trainable attribute to False"
            )
        return (
            f"use {name} in the computation of the loss, or delete it; if it is meant to stay "
            "untrained, create it with trainable=False"
        )
    if verdict.blockers[0].reason is Reason.LEFT_TENSORFLOW:
        return "compute the loss with TensorFlow ops only: no .numpy(), float() or NumPy on tensors"
    types = {b.op_type for b in verdict.blockers}
    if types & _SELECTIONS:
        return (
            "replace the argmax with a differentiable soft-argmax, e.g.\n"
            "    soft = tf.nn.softmax(scores / temperature)\n"
            "    index = tf.reduce_sum(soft * tf.range(tf.shape(scores)[-1], dtype=soft.dtype), -1)"
        )
    if types <= _TRANSFORMS:
        return straight_through(verdict, name, source)
    first = verdict.blockers[0]
    return blocker_fix(first, name)


def straight_through(verdict: VariableVerdict, name: str, source: SourceLines) -> str:
    """`forward = w + tf.stop_gradient(transform(w) - w)`, on the user's own line if we can."""
    last = _last_cut(verdict)
    rewrite = assignment(source.line(last.location)) if last is not None else None
    if rewrite is not None:
        target, value = rewrite
        line = f"{target} = {name} + tf.stop_gradient({value} - {name})"
        where = f" (line {last.location.line})" if last and last.location else ""
    else:
        types = {b.op_type for b in verdict.blockers}
        template = (
            _ELEMENTWISE[types.pop()] if len(types) == 1 and types <= set(_ELEMENTWISE) else None
        )
        forward = template.format(name) if template else f"transformed({name})"
        line = f"{name}_forward = {name} + tf.stop_gradient({forward} - {name})"
        where = ""
    stops = [b for b in verdict.blockers if b.reason is Reason.STOP_GRADIENT]
    if len(stops) == len(verdict.blockers):
        lead = (
            f"remove the tf.stop_gradient, or, to keep the transformed value in the forward "
            f"pass and still train {name}, use the straight-through estimator{where}:"
        )
    else:
        lead = (
            f"to use the transformed value forward and still train {name}, use the "
            f"straight-through estimator{where}"
            + ("; no other tf.stop_gradient is needed:" if stops else ":")
        )
    return f"{lead}\n    {line}"


_ELEMENTWISE = {
    "Round": "tf.round({})",
    "Floor": "tf.floor({})",
    "Ceil": "tf.math.ceil({})",
    "Rint": "tf.math.rint({})",
    "Sign": "tf.sign({})",
}


def _last_cut(verdict: VariableVerdict) -> Blocker | None:
    """The cut nearest to the loss on the variable's path, else the last one listed."""
    on_route = [step.op for step in verdict.route if step.cut is not None]
    for op in reversed(on_route):
        for blocker in verdict.blockers:
            if blocker.op == op and blocker.location is not None:
                return blocker
    located = [b for b in verdict.blockers if b.location is not None]
    return located[-1] if located else None


def blocker_fix(blocker: Blocker, name: str) -> str:
    where = f" at line {blocker.location.line}" if blocker.location else ""
    fixes = {
        Reason.STOP_GRADIENT: f"remove the tf.stop_gradient{where}, or create {name} with "
        "trainable=False if the cut is intended",
        Reason.INTEGER_DTYPE: f"keep {name}'s path in floating point; for a threshold use a soft "
        "one (tf.sigmoid((x - t) / temperature)), for quantization the straight-through estimator",
        Reason.NON_DIFFERENTIABLE_OP: f"replace the {blocker.op_type}{where} with a differentiable "
        "op, or use the straight-through estimator around it",
        Reason.INDEX_OR_SHAPE_INPUT: f"{name} only selects or shapes values{where}; if it must "
        "learn, let it weight values instead of picking them, else create it with trainable=False",
        Reason.CUSTOM_GRADIENT_NONE: f"return a gradient for {name} from the gradient function of "
        f"the tf.custom_gradient{where}",
        Reason.ZERO_GRADIENT: f"the {blocker.op_type}{where} has a zero gradient everywhere; use a "
        "smooth stand-in (tf.tanh(x / temperature) for tf.sign) or the straight-through estimator",
        Reason.ASSIGN: f"{name} reaches the loss only through an assignment{where}; read the "
        "variable in the loss instead of copying it",
        Reason.OTHER: f"{blocker.message}",
    }
    return fixes[blocker.reason]
