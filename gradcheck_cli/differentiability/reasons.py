"""Why gradient does not cross an edge: the reasons every layer above names cuts by."""

from __future__ import annotations

import enum


class Reason(str, enum.Enum):
    """Why gradient does not cross an edge (DESIGN.md, "Reasons a path is cut")."""

    STOP_GRADIENT = "stop_gradient"
    NON_DIFFERENTIABLE_OP = "non_differentiable_op"
    INTEGER_DTYPE = "integer_dtype"
    INDEX_OR_SHAPE_INPUT = "index_or_shape_input"
    CUSTOM_GRADIENT_NONE = "custom_gradient_none"
    ZERO_GRADIENT = "zero_gradient"
    ASSIGN = "assign"
    # The loss turns a tensor into a Python or NumPy value (`.numpy()`, `float()`, NumPy).
    LEFT_TENSORFLOW = "left_tensorflow"
    OTHER = "other"
