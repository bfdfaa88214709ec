"""TensorFlow's own answer for a training script: each gradient request it makes, and which of
the requested variables get a None gradient.

    python -m tests.run_oracle OUT.json SCRIPT [ARGS...]

The script runs unchanged as `__main__` (its arguments in sys.argv, the working directory left
as it is) with two of TensorFlow's entry points wrapped: `tf.GradientTape.gradient` (TF2: eager,
in a `tf.function`, inside Keras `fit`) and `gradients_util._GradientsHelper`, which is what
`tf.gradients` and the v1 `Optimizer.compute_gradients`/`minimize` call. A request is recorded
once per call site (eager loops repeat it) and only when its sources include variables, so the
backward functions TensorFlow builds for itself (sources: function inputs) are not requests.

OUT.json is written when the script ends, however it ends:

    {"script": str, "error": str | null,
     "requests": [{"api": str, "location": {"file": str, "line": int} | null,
                   "variables": [str], "none": [str]}]}

Variable names: a Keras variable's `path` (`dense_1/kernel`), else the TensorFlow name without
":0" (TF1: the variable op's name, `hidden1/weights_i`). The call site is the innermost frame
outside Python's and the installed packages' files, with autograph's generated code mapped back
to the user's lines by TensorFlow's own stack extraction. Independent of gradcheck by design:
nothing here imports gradcheck_cli.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import sysconfig
import traceback
from typing import Any

# Ops whose output is a variable itself (TF1 reference variables, resource handles).
_VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})
_LIBRARY_DIRS = tuple(
    os.path.realpath(sysconfig.get_path(key)) + os.sep
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
)


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<"):
        return False
    path = os.path.realpath(filename)
    return path != os.path.realpath(__file__) and not path.startswith(_LIBRARY_DIRS)


def _call_site() -> dict[str, Any] | None:
    """The user's line that asked for gradients."""
    # TensorFlow's extraction applies autograph's source maps, so a traced tf.function reports
    # the user's own file and line rather than autograph's generated copy.
    from tensorflow.python.util import tf_stack

    for frame in reversed(tf_stack.extract_stack()):
        if _is_user_file(frame.filename):
            return {"file": os.path.realpath(frame.filename), "line": frame.lineno}
    return None


def _variable_name(source: Any) -> str | None:
    """The name of a variable source, or None when the source is not a variable."""
    import tensorflow as tf

    path = getattr(source, "path", None)
    if isinstance(path, str) and type(source).__module__.startswith("keras"):
        return path
    if isinstance(source, tf.Variable):
        return source.name.removesuffix(":0")
    op = getattr(source, "op", None)
    if op is not None and getattr(op, "type", None) in _VARIABLE_OPS:
        return op.name
    return None


class Recorder:
    """Collects the gradient requests, one per call site."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._seen: set[tuple[str, str, int]] = set()

    def record(self, api: str, sources: list[Any], gradients: list[Any]) -> None:
        names = [_variable_name(source) for source in sources]
        if not any(names):
            return
        location = _call_site()
        key = (api, *(location.values() if location else ("", 0)))
        if key in self._seen:
            return
        self._seen.add(key)
        variables = [name for name in names if name]
        none = [name for name, grad in zip(names, gradients) if name and grad is None]
        self.requests.append(
            {"api": api, "location": location, "variables": variables, "none": none}
        )


def _install(recorder: Recorder) -> None:
    """Wraps TensorFlow's two gradient entry points so each request is recorded."""
    import tensorflow as tf
    from tensorflow.python.ops import gradients_util

    tape_gradient = tf.GradientTape.gradient
    gradients_helper = gradients_util._GradientsHelper

    def gradient(self: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        result = tape_gradient(self, target, sources, *args, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        recorder.record("GradientTape.gradient", flat_sources, tf.nest.flatten(result))
        return result

    def helper(ys: Any, xs: Any, *args: Any, **kwargs: Any) -> Any:
        result = gradients_helper(ys, xs, *args, **kwargs)
        flat_sources = list(xs) if isinstance(xs, (list, tuple)) else [xs]
        recorder.record("tf.gradients", flat_sources, list(result))
        return result

    tf.GradientTape.gradient = gradient
    gradients_util._GradientsHelper = helper


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m tests.run_oracle OUT.json SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    out_path, script, *script_args = argv
    recorder = Recorder()
    _install(recorder)
    error = None
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            error = f"SystemExit: {stop.code}"
    except BaseException as failure:  # the script's own failure is part of the answer
        traceback.print_exc()
        error = f"{type(failure).__name__}: {failure}"
    report = {"script": os.path.realpath(script), "error": error, "requests": recorder.requests}
    with open(out_path, "w") as out:
        json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
