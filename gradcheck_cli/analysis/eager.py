"""Decide each variable's status from TensorFlow's eager gradients (a loss that leaves TF)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gradcheck_cli.analysis.verdicts import Blocker, Status, Unreached, VariableVerdict
from gradcheck_cli.differentiability.reasons import UNSEEN_EAGER_CUT, Reason
from gradcheck_cli.graph.model import SourceLocation, TensorFlowVerdict, Variable


def eager_verdicts(
    variables: Sequence[Variable],
    gradients: Mapping[str, TensorFlowVerdict],
    left_at: SourceLocation | None,
    reason: str,
) -> tuple[VariableVerdict, ...]:
    """One verdict per variable; a variable read without gradient is cut where the value leaves
    TensorFlow (`left_at`, in TensorFlow's words `reason`)."""
    leaves = Blocker(
        op="<eager>",
        op_type="LeavesTensorFlow",
        reason=Reason.LEFT_TENSORFLOW,
        message=f"the value leaves TensorFlow here, so the gradient cannot follow ({reason})",
        location=left_at,
    )
    if left_at is None and reason == UNSEEN_EAGER_CUT:  # what is known, and no more
        leaves = Blocker(
            op="<eager>",
            op_type="NoGradient",
            reason=Reason.OTHER,
            message=(
                "TensorFlow's tape gives it no gradient (None), and no value was seen leaving "
                "TensorFlow: gradcheck could not rebuild this eager step to show the op that "
                "cuts it (an op without a gradient, such as a tf.data reduction, is one)"
            ),
        )
    verdicts = []
    for variable in variables:
        gradient = gradients.get(variable.name)
        if not variable.trainable:
            verdict = VariableVerdict(variable, Status.FROZEN)
        elif gradient is TensorFlowVerdict.GRADIENT:
            verdict = VariableVerdict(variable, Status.OK)
        elif gradient is TensorFlowVerdict.UNREAD:
            why = Unreached.NEVER_READ
            if variable.created_again is not None:
                why = Unreached.CREATED_AGAIN
            elif variable.read_in_dataset is not None:
                why = Unreached.READ_IN_DATASET
            elif variable.read_before_tape is not None:  # a value the tape used, computed before
                why = Unreached.NOT_READ_BY_TAPE
            verdict = VariableVerdict(variable, Status.UNUSED, unreached=why)
        else:
            verdict = VariableVerdict(variable, Status.BLOCKED, blockers=(leaves,))
        verdicts.append(verdict)
    return tuple(verdicts)
