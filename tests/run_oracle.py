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
                   "variables": [str], "none": [str],
                   "sources": [{"name": str, "line": int | null, "none": bool}]}],
     "created": [{"name": str, "line": int | null, "trainable": bool}]}

Variable names: a Keras variable's `path` (`dense_1/kernel`), else the TensorFlow name without
":0" (TF1: the variable op's name, `hidden1/weights_i`). Several variables may share one
(`tf.Variable(...)` without `name=` is `Variable`): `sources` and `created` tell them apart by
the order the script created them, `Variable`, `Variable_1`, ..., and give the line of the
script that created each (a variable created out of the oracle's sight keeps its name, with no
line). `created` lists every variable the script created, in that order. The call site is the
innermost frame outside Python's and the installed packages' files, with autograph's generated
code mapped back to the user's lines by TensorFlow's own stack extraction. Independent of
gradcheck by design: nothing here imports gradcheck_cli.
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


def _user_line() -> int | None:
    """The line of the script's own code on the current stack (innermost)."""
    for frame in reversed(traceback.extract_stack()):
        if _is_user_file(frame.filename):
            return frame.lineno
    return None


class Recorder:
    """Collects the gradient requests, one per call site, and the variables the script creates."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._seen: set[tuple[str, str, int]] = set()
        # (tf.Variable, its name told apart from the others', the line that created it)
        self.created: list[tuple[Any, str, int | None]] = []
        self._told_apart: dict[int, tuple[str, int | None]] = {}  # by id of the tf.Variable
        self._sharing: dict[str, int] = {}  # name -> how many created variables have it

    def variable_created(self, variable: Any) -> None:
        name = variable.name.removesuffix(":0")
        shared = self._sharing.get(name, 0)
        self._sharing[name] = shared + 1
        told_apart = f"{name}_{shared}" if shared else name
        line = _user_line()
        self.created.append((variable, told_apart, line))  # keeps the id its own
        self._told_apart[id(variable)] = (told_apart, line)

    def told_apart(self, source: Any, name: str) -> tuple[str, int | None]:
        """A source's name told apart from other variables' (a Keras 3 variable by the
        tf.Variable it holds) and the line that created it."""
        for variable in (source, getattr(source, "_value", None)):
            found = self._told_apart.get(id(variable)) if variable is not None else None
            if found is not None:
                return found
        return name, None

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
        told = []
        for source, name, grad in zip(sources, names, gradients):
            if name:
                told_apart, line = self.told_apart(source, name)
                told.append({"name": told_apart, "line": line, "none": grad is None})
        self.requests.append(
            {
                "api": api,
                "location": location,
                "variables": variables,
                "none": none,
                "sources": told,
            }
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


def _creating(recorder: Recorder) -> Any:
    """A variable creator scope that tells `recorder` of each variable the script creates."""
    import tensorflow as tf

    def record(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        recorder.variable_created(variable)
        return variable

    return tf.variable_creator_scope(record)


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
        with _creating(recorder):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            error = f"SystemExit: {stop.code}"
    except BaseException as failure:  # the script's own failure is part of the answer
        traceback.print_exc()
        error = f"{type(failure).__name__}: {failure}"
    created = [
        {"name": name, "line": line, "trainable": bool(getattr(variable, "trainable", False))}
        for variable, name, line in recorder.created
    ]
    report = {
        "script": os.path.realpath(script),
        "error": error,
        "requests": recorder.requests,
        "created": created,
    }
    with open(out_path, "w") as out:
        json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
