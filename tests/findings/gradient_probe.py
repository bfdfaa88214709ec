"""Run by the fix tests in a fresh process: TensorFlow's gradient of each model's `loss` for one
variable, the TF2 models first (a TF1 model turns eager execution off for the process).

Arguments: a JSON list of [script path, variable name], and the file to write a JSON list of
"gradient", "none" or "zero" into, in that order."""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

import numpy as np
import tensorflow as tf

DRAWS = 8


def _module(path: str, index: int) -> Any:
    spec = importlib.util.spec_from_file_location(f"probed_{index}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _value(spec: Any, rng: np.random.Generator) -> np.ndarray:
    shape = [8 if dim is None else dim for dim in spec.shape.as_list()]
    if spec.dtype.is_integer:
        return rng.integers(0, 3, size=shape).astype(spec.dtype.as_numpy_dtype)
    return rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)


def _eager_gradient(path: str, name: str, index: int) -> str:
    loss = _module(path, index).loss
    specs = getattr(loss, "input_signature", None) or ()
    rng = np.random.default_rng(0)
    verdict = "none"
    for _ in range(DRAWS):
        with tf.GradientTape() as tape:
            value = loss(*[_value(spec, rng) for spec in specs])
        found = [v for v in tape.watched_variables() if v.name.split(":")[0] == name]
        gradient = tape.gradient(value, found[0]) if found else None
        if gradient is not None:
            if np.any(tf.convert_to_tensor(gradient).numpy() != 0):
                return "gradient"
            verdict = "zero"
    return verdict


def _graph_gradient(path: str, name: str, index: int) -> str:
    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph:  # each model in a graph of its own
        module = _module(path, index)
        variable = next(v for v in v1.global_variables() if v.op.name == name)
        gradient = v1.gradients(module.loss, variable)[0]
        if gradient is None:
            return "none"
        rng = np.random.default_rng(0)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            placeholders = [op for op in graph.get_operations() if op.type == "Placeholder"]
            for _ in range(DRAWS):
                feed = {op.outputs[0]: _value(op.outputs[0], rng) for op in placeholders}
                if np.any(session.run(gradient, feed) != 0):
                    return "gradient"
    return "zero"


def main() -> None:
    cases = json.loads(sys.argv[1])
    tf1 = ["disable_v2_behavior" in open(path).read() for path, _ in cases]
    verdicts: dict[int, str] = {}
    for index in sorted(range(len(cases)), key=lambda i: tf1[i]):
        path, name = cases[index]
        probe = _graph_gradient if tf1[index] else _eager_gradient
        verdicts[index] = probe(path, name, index)
    with open(sys.argv[2], "w") as out:
        json.dump([verdicts[i] for i in range(len(cases))], out)


if __name__ == "__main__":
    main()
