"""TensorFlow as the judge: which trainable variables get no (or an all-zero) gradient from a loss.

Each question runs in a fresh process (forked from one that imported TensorFlow once,
`forked_python`), so a TF1 script's `tf.disable_v2_behavior()` or a
script's global state never leaks into the test process, and the answer comes back as JSON in a
temporary file (a script may print whatever it likes on stdout).

Verdicts, per trainable variable (TF name without ":0"; for Keras 3 weights that is the Keras path;
in a script, variables that share a name, such as `tf.Variable(...)` without `name=`, told apart
by the order the script created them: `Variable`, `Variable_1`, ...):
- "none": TensorFlow's gradient is None (including variables the loss never reads);
- "zero": the gradient exists but evaluates to exactly all zeros on random inputs;
- "gradient": anything else.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

from tests import forked_python

DEAD = frozenset({"none", "zero"})
"""Verdicts that mean "training on this loss can never change the variable"."""

TIMEOUT_SECONDS = 300

# The child program: argv = [mode ("script" | "savedmodel"), target path, loss name, out path].
_CHILD = r'''
import json
import os
import runpy
import sys
import traceback

mode, target, loss_name, out_path = sys.argv[1:5]


def write(payload):
    with open(out_path, "w") as out:
        json.dump(payload, out)


try:
    import numpy as np
    import tensorflow as tf

    BATCH = 8  # stands in for every unknown dimension
    rng = np.random.default_rng(0)

    def random_value(shape, dtype):
        dtype = tf.as_dtype(dtype)
        shape = tf.TensorShape(shape)
        dims = [] if shape.rank is None else [BATCH if d is None else d for d in shape.as_list()]
        if dtype.is_floating or dtype.is_complex:
            return rng.standard_normal(dims).astype(dtype.as_numpy_dtype)
        if dtype.is_integer:
            # 0 and 1 are valid class labels, indices and counts for any sensible input.
            return rng.integers(0, 2, size=dims).astype(dtype.as_numpy_dtype)
        if dtype == tf.bool:
            return rng.random(dims) < 0.5
        if dtype == tf.string:
            return np.full(dims, b"a", dtype=object)
        raise TypeError(f"cannot make a random input of dtype {dtype.name}")

    def short_name(name):
        base, _, index = name.rpartition(":")
        return base if base and index.isdigit() else name

    def verdict(value):
        return "zero" if not np.any(np.asarray(value) != 0) else "gradient"

    def collect(pairs):
        """pairs: (variable name, verdict); duplicate names would make the answer ambiguous."""
        verdicts = {}
        for name, answer in pairs:
            if name in verdicts:
                raise ValueError(f"two trainable variables are named {name!r}")
            verdicts[name] = answer
        return verdicts

    def unique(variables):
        seen, kept = set(), []
        for variable in variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                kept.append(variable)
        return kept

    def output_tensor(value, key=None):
        if isinstance(value, dict):
            if key is None:
                if len(value) != 1:
                    raise ValueError(f"the loss returns several outputs: {sorted(value)}")
                (value,) = value.values()
            else:
                value = value[key]
        return value

    def lookup(root, dotted, getter):
        parts = dotted.split(".")
        value = getter(root, parts[0])
        for part in parts[1:]:
            value = getattr(value, part)
        return value

    def tf1_verdicts(loss):
        graph = loss.graph
        with graph.as_default():
            variables = graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
            gradients = tf.compat.v1.gradients(loss, variables)
            dense = [None if g is None else tf.convert_to_tensor(g) for g in gradients]
            feeds = {}
            for op in graph.get_operations():
                if op.type == "Placeholder":
                    tensor = op.outputs[0]
                    feeds[tensor] = random_value(tensor.shape, tensor.dtype)
            initializers = [
                tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer(),
            ]
            with tf.compat.v1.Session(graph=graph) as session:
                session.run(initializers)
                values = session.run([g for g in dense if g is not None], feeds)
        values = iter(values)
        return collect(
            (variable.op.name, "none" if g is None else verdict(next(values)))
            for variable, g in zip(variables, dense)
        )

    def tape_verdicts(call, variables_before, variables_after, names=None):
        """`names()`: each variable's name by id, where the names of the variables are told
        apart (asked once the loss ran: it may create variables); else TensorFlow's."""
        with tf.GradientTape() as tape:
            for variable in variables_before():
                tape.watch(variable)
            value = call()
        variables = variables_after()
        gradients = tape.gradient(value, variables)
        named = names() if names is not None else None
        name_of = (lambda v: named[id(v)]) if named else (lambda v: short_name(v.name))
        return collect(
            (name_of(v), "none" if g is None else verdict(tf.convert_to_tensor(g)))
            for v, g in zip(variables, gradients)
        )

    def told_apart(variables):
        """id -> name for variables in the order of their creation, those that share a name
        told apart: `Variable`, `Variable_1`, ..."""
        sharing, named = {}, {}
        for variable in variables:
            name = short_name(variable.name)
            shared = sharing.get(name, 0)
            sharing[name] = shared + 1
            named[id(variable)] = f"{name}_{shared}" if shared else name
        return named

    def random_call(function, signature):
        def tensor(spec):
            return tf.constant(random_value(spec.shape, spec.dtype))

        args, kwargs = tf.nest.map_structure(tensor, signature)
        return lambda: function(*args, **kwargs)

    def script_verdicts():
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        created = []

        def record(next_creator, **kwargs):
            variable = next_creator(**kwargs)
            created.append(variable)
            return variable

        def trainable_created():
            return [v for v in unique(created) if getattr(v, "trainable", False)]

        with tf.variable_creator_scope(record):
            namespace = runpy.run_path(target, run_name="gradcheck_oracle")

            def from_namespace(ns, name):
                if name in ns:
                    return ns[name]
                graph = tf.compat.v1.get_default_graph()
                if ":" in loss_name:
                    return graph.get_tensor_by_name(loss_name)
                return graph.get_operation_by_name(loss_name).outputs[0]

            loss = lookup(namespace, loss_name, from_namespace)
            if tf.is_tensor(loss) and tf.is_symbolic_tensor(loss):
                return "tf1", tf1_verdicts(loss)

            def names():
                return told_apart(unique(created))

            if tf.is_tensor(loss):  # an eager value computed at import: nothing can train
                named = names()
                return "tf2", collect((named[id(v)], "none") for v in trainable_created())
            if not callable(loss):
                raise TypeError(f"{loss_name!r} is neither a tensor nor a callable")
            signature = getattr(loss, "input_signature", None)
            call = loss if signature is None else random_call(loss, (tuple(signature), {}))
            return "tf2", tape_verdicts(
                lambda: output_tensor(call()), trainable_created, trainable_created, names
            )

    def savedmodel_verdicts():
        from tensorflow.python.checkpoint import graph_view, util

        root = tf.saved_model.load(target)
        signature_name, _, output_key = loss_name.partition(":")
        if signature_name in root.signatures:
            function = root.signatures[signature_name]
            signature = function.structured_input_signature
        else:
            function = lookup(root, loss_name, getattr)
            signature = function.concrete_functions[0].structured_input_signature
        objects = util.list_objects(graph_view.ObjectGraphView(root))
        variables = [o for o in unique(objects) if isinstance(o, tf.Variable) and o.trainable]
        call = random_call(function, signature)
        return "savedmodel", tape_verdicts(
            lambda: output_tensor(call(), output_key or None), lambda: variables, lambda: variables
        )

    kind, verdicts = script_verdicts() if mode == "script" else savedmodel_verdicts()
    write({"kind": kind, "verdicts": verdicts})
except BaseException:
    write({"error": traceback.format_exc()})
'''


class OracleError(RuntimeError):
    """TensorFlow could not answer: the script raised, the loss was not found, ..."""


@dataclass
class PendingVerdicts:
    """An oracle question running in a subprocess; `result()` waits for the answer."""

    description: str
    process: forked_python.ForkedProcess
    tmp: tempfile.TemporaryDirectory[str]
    out_path: str
    _answer: dict[str, str] | OracleError | None = None

    def result(self) -> dict[str, str]:
        if self._answer is None:
            self._answer = self._collect()
        if isinstance(self._answer, OracleError):
            raise self._answer
        return self._answer

    def cancel(self) -> None:
        """Stop the subprocess if it is still running and drop its files."""
        if self._answer is None:
            self.process.kill()
            self.process.communicate()
            self.tmp.cleanup()
            self._answer = OracleError(f"{self.description}: cancelled")

    def _collect(self) -> dict[str, str] | OracleError:
        try:
            _, stderr = self.process.communicate(timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            self.tmp.cleanup()
            return OracleError(f"{self.description}: timed out after {TIMEOUT_SECONDS} s")
        try:
            with open(self.out_path) as out:
                payload: dict[str, Any] = json.load(out)
        except (OSError, ValueError):
            return OracleError(
                f"{self.description}: the subprocess exited with {self.process.returncode} "
                f"without an answer\n{stderr[-4000:]}"
            )
        finally:
            self.tmp.cleanup()
        if "error" in payload:
            return OracleError(f"{self.description}:\n{payload['error']}")
        return dict(payload["verdicts"])


def _start(mode: str, target: str, loss: str) -> PendingVerdicts:
    tmp = tempfile.TemporaryDirectory(prefix="gradcheck-oracle-")
    out_path = os.path.join(tmp.name, "verdicts.json")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    process = forked_python.start(["-c", _CHILD, mode, os.fspath(target), loss, out_path], env)
    return PendingVerdicts(f"oracle on {target} (loss {loss!r})", process, tmp, out_path)


def start_dead_in_script(script_path: str, loss: str) -> PendingVerdicts:
    """Start `dead_in_script` in the background (to run several oracles at once)."""
    return _start("script", script_path, loss)


def start_dead_in_savedmodel(path: str, loss: str) -> PendingVerdicts:
    """Start `dead_in_savedmodel` in the background."""
    return _start("savedmodel", path, loss)


def dead_in_script(script_path: str, loss: str) -> dict[str, str]:
    """TensorFlow's verdict on every trainable variable a script creates, for the loss `loss`.

    The script runs via `runpy.run_path(script, run_name="gradcheck_oracle")` in a fresh process.
    TF1 (the loss is a graph tensor, or a tensor/op name in the default graph): `tf.gradients`
    against the graph's trainable-variables collection, evaluated in a Session with random feeds
    for every placeholder. TF2 (the loss is a callable): a GradientTape watching every trainable
    variable the script created (recorded with `tf.variable_creator_scope`), the loss called with
    random inputs from its `input_signature`, or with no arguments.
    Returns {variable name: "none" | "zero" | "gradient"}.
    """
    return start_dead_in_script(script_path, loss).result()


def dead_in_savedmodel(path: str, loss: str) -> dict[str, str]:
    """TensorFlow's verdict on every trainable variable of a SavedModel, for the loss `loss`.

    `loss` is an attribute path from the root (`loss`, `model.loss`), a signature name, or
    `SIGNATURE:OUTPUT_KEY`. The function is called under a GradientTape with random inputs built
    from its input signature; the variables are every trainable variable of the loaded object.
    """
    return start_dead_in_savedmodel(path, loss).result()


def dead_names(verdicts: dict[str, str]) -> set[str]:
    """The variables TensorFlow says can never train."""
    return {name for name, answer in verdicts.items() if answer in DEAD}
