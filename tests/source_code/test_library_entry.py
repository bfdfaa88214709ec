"""Which library made an op that the user's line only called it for, from the frames past the
user's own, as TensorFlow records them (these are the frames TensorFlow 2.x records for each
call). The user's own call of an op's API is no library's doing."""

from __future__ import annotations

import os

import pytest

from gradcheck_cli.source_code.debug_info import library_entry

SITE = os.sep.join(["", "venv", "lib", "python3.11", "site-packages", ""])
TF = "tensorflow/python/"
WRAPPERS = [
    (TF + "util/traceback_utils.py", "error_handler"),
    (TF + "util/dispatch.py", "op_dispatch_handler"),
]
MAKER = [
    (TF + "framework/op_def_library.py", "_apply_op_helper"),
    (TF + "framework/ops.py", "_create_op_internal"),
]


def _frames(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(SITE + path.replace("/", os.sep), function) for path, function in calls]


CASES = {
    "tf.cast": (
        WRAPPERS + [(TF + "ops/math_ops.py", "cast"), (TF + "ops/gen_math_ops.py", "cast")] + MAKER,
        None,
    ),
    "tf.round": (
        [(TF + "ops/weak_tensor_ops.py", "wrapper")]
        + WRAPPERS
        + [(TF + "ops/math_ops.py", "round"), (TF + "ops/gen_math_ops.py", "round")]
        + MAKER,
        None,
    ),
    "tf.argmax": (
        WRAPPERS + [(TF + "ops/math_ops.py", "argmax_v2"), (TF + "ops/gen_math_ops.py", "arg_max")],
        None,
    ),
    "keras.ops.cast": (
        [("keras/src/ops/core.py", "cast"), ("keras/src/backend/tensorflow/core.py", "cast")]
        + WRAPPERS
        + [(TF + "ops/math_ops.py", "cast"), (TF + "ops/gen_math_ops.py", "cast")],
        None,
    ),
    "tf.stop_gradient": (WRAPPERS + [(TF + "ops/array_ops.py", "stop_gradient")], None),
    "tf.image.convert_image_dtype": (
        WRAPPERS
        + [(TF + "ops/image_ops_impl.py", "convert_image_dtype")]
        + WRAPPERS
        + [(TF + "ops/math_ops.py", "saturate_cast")]
        + WRAPPERS,
        "TensorFlow's convert_image_dtype",
    ),
    "a Keras layer": (
        [
            ("keras/src/layers/layer.py", "__call__"),
            ("keras/src/layers/normalization/batch_normalization.py", "call"),
            ("keras/src/ops/core.py", "stop_gradient"),
        ],
        "Keras",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_library_that_made_the_op_is_told_and_an_ops_own_api_is_not(case: str) -> None:
    frames, expected = CASES[case]
    assert library_entry(_frames(frames)) == expected
