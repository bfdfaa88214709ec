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


# An eager step where no value was seen leaving TensorFlow and no graph could be rebuilt:
# TensorFlow's tape says which variables get None, and nothing more is known of where.
UNSEEN_EAGER_CUT = "the step runs eagerly, so gradcheck sees no graph to show the cut in"

# How an eager value leaves TensorFlow, by the method the script's code called on it.
LEAVE_WORDS = {
    "numpy": "`.numpy()` turns the tensor into a NumPy array",
    "__array__": "NumPy turns the tensor into an array",
    "__float__": "`float()` turns the tensor into a Python number",
    "__int__": "`int()` turns the tensor into a Python number",
    "__index__": "the tensor is used as a Python index",
    "__bool__": "the tensor is used as a Python truth value (`if`, `max()`, `min()`)",
    "predict": "Keras's `predict()` returns NumPy arrays, computed outside the tape",
}
