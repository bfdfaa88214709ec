"""A training script's own time to its first gradient request, under plain Python.

    python benchmarks/first_request.py SCRIPT [ARGS...]

Runs SCRIPT as `python SCRIPT ARGS...` would (`__main__`, its folder first on `sys.path`),
with TensorFlow's gradient entry points wrapped, and ends the process where `gradcheck run`
stops it: at the first weight change after the first gradient request (a `tf.function` step is
traced to its end first, so its every request is made; an eager step stops at its optimizer's
update). This is the floor under `gradcheck run SCRIPT`: the script's own import and trace,
nothing of gradcheck. Prints one JSON object: `first_request_s` and `stopped_s`, seconds
since the process started, and the API of the first request. Exits 0 when stopped (or when the
script fails after its first request), 3 if the script ended without one. Linux only (the
process's start time is read from /proc).
"""

from __future__ import annotations

import inspect
import json
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any


def _age() -> float:
    """Seconds since this process started, as the kernel counts them (10 ms ticks)."""
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started / os.sysconf("SC_CLK_TCK")


class _Harness:
    def __init__(self) -> None:
        self.first_request: tuple[float, str] | None = None
        self.busy = 0

    def requested(self, api: str) -> None:
        if self.first_request is None and not self.busy:
            self.first_request = (_age(), api)

    def stop(self) -> None:
        """At a weight change: exit if a request came before it."""
        if self.first_request is None or self.busy:
            return
        when, api = self.first_request
        print(json.dumps({"first_request_s": when, "stopped_s": _age(), "api": api}), flush=True)
        os._exit(0)


def _install(harness: _Harness) -> None:
    import tensorflow as tf
    from tensorflow.python.client import session
    from tensorflow.python.eager import context
    from tensorflow.python.eager.polymorphic_function import atomic_function
    from tensorflow.python.ops import gradients_util, resource_variable_ops
    from tensorflow.python.training import optimizer as v1_optimizer

    def is_variable(value: Any) -> bool:
        return isinstance(getattr(value, "_value", value), tf.Variable) or isinstance(
            value, tf.Variable
        )

    def wrap(owner: Any, name: str, before: Any) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before(*args, **kwargs)
            harness.busy += 1
            try:
                return original(*args, **kwargs)
            finally:
                harness.busy -= 1

        setattr(owner, name, wrapper)

    def tape_gradient(tape: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> None:
        if any(is_variable(s) for s in tf.nest.flatten(sources)):
            harness.requested("GradientTape.gradient")

    helper = inspect.signature(gradients_util._GradientsHelper)

    def graph_gradients(*args: Any, **kwargs: Any) -> None:
        # With `src_graph`, TensorFlow differentiates a tf.function's call for a tape itself.
        if helper.bind(*args, **kwargs).arguments.get("src_graph") is None:
            harness.requested("tf.gradients")

    def eager_stop(*args: Any, **kwargs: Any) -> None:
        if context.executing_eagerly():
            harness.stop()

    def stop(*args: Any, **kwargs: Any) -> None:
        harness.stop()

    wrap(tf.GradientTape, "gradient", tape_gradient)
    wrap(gradients_util, "_GradientsHelper", graph_gradients)
    wrap(atomic_function.AtomicFunction, "call_flat", eager_stop)
    wrap(session.BaseSession, "run", stop)
    wrap(v1_optimizer.Optimizer, "apply_gradients", eager_stop)
    for method in ("assign", "assign_add", "assign_sub", "scatter_add", "scatter_sub"):
        wrap(resource_variable_ops.BaseResourceVariable, method, eager_stop)


def main() -> None:
    script = Path(sys.argv[1]).resolve()
    harness = _Harness()
    _install(harness)
    sys.argv = [str(script), *sys.argv[2:]]
    sys.path[0] = str(script.parent)
    try:
        runpy.run_path(str(script), run_name="__main__")
    except Exception:
        # A step that fails once it asked for gradients (TensorFlow's "No gradients provided"
        # while tracing) is where gradcheck reports too.
        harness.busy = 0
        harness.stop()
        raise
    harness.stop()  # a script that asks for gradients and never trains is reported at its end
    print(json.dumps({"first_request_s": None, "stopped_s": None, "api": None}), flush=True)
    sys.exit(3)


if __name__ == "__main__":
    main()
