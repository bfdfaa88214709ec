"""Ask TensorFlow which weights of a compiled Keras model its training objective can never train.

The objective is what `model.fit` minimises in Keras 3: `model.compute_loss(x, y, y_pred,
training=True)` with `y_pred = model(x, training=True)`, i.e. the compiled loss(es) with their
loss weights plus every term of `model.losses` (kernel/activity regularizers, `add_loss`).
A `tf.GradientTape` watches the backing `tf.Variable` (`.value`) of every weight in
`model.weights`; inputs and targets are seeded random values of the model's own shapes.

Verdicts per weight, keyed by its Keras path (`dense_3/kernel`):
- "frozen": not in `model.trainable_weights` (`layer.trainable = False`, BatchNorm statistics);
- "none": the gradient is None; "zero": it evaluates to exactly all zeros; "gradient": otherwise.

`data_only` is the same question for the compiled loss alone (`model._compile_loss`, the
`CompileLoss` that `compute_loss` itself calls, without `model.losses`), so a test can tell which
weights get gradient only from a regularizer or `add_loss` term.

Scripts run in a fresh process (`start_script_verdicts`, forked by `forked_python`), so the
names Keras gives unnamed layers depend only on the script, as they do when gradcheck imports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import forked_python

DEAD = frozenset({"none", "zero"})
"""Verdicts that mean "training on this objective can never change the weight"."""

BATCH = 4
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class KerasVerdicts:
    """TensorFlow's answer for one model: the full objective and the compiled loss alone."""

    full: dict[str, str]
    data_only: dict[str, str]
    layers: dict[str, list[str]] = field(default_factory=dict)
    """For a model's attributes that are layers (subclassed models): attribute -> weight paths."""

    @property
    def trainable(self) -> set[str]:
        return {name for name, answer in self.full.items() if answer != "frozen"}

    @property
    def frozen(self) -> set[str]:
        return {name for name, answer in self.full.items() if answer == "frozen"}

    @property
    def dead(self) -> set[str]:
        """Trainable weights the full objective gives no (or an all-zero) gradient."""
        return {name for name, answer in self.full.items() if answer in DEAD}

    @property
    def trained_only_by_model_losses(self) -> set[str]:
        """Weights with a gradient from the objective, but none from the compiled loss alone."""
        return {
            name
            for name, answer in self.full.items()
            if answer == "gradient" and self.data_only[name] in DEAD
        }

    def to_json(self) -> str:
        return json.dumps({"full": self.full, "data_only": self.data_only, "layers": self.layers})

    @classmethod
    def from_json(cls, text: str) -> KerasVerdicts:
        payload = json.loads(text)
        return cls(payload["full"], payload["data_only"], payload.get("layers", {}))


def random_inputs(model: Any, *, batch: int = BATCH, seed: int = 0, int_high: int = 2) -> Any:
    """Seeded random inputs in the structure and shapes of `model.input` (None -> `batch`).

    Integer inputs are drawn from [0, int_high). A subclassed model has no symbolic inputs: its
    float32 input shape comes from the shape it was built with.
    """
    import keras
    import numpy as np

    rng = np.random.default_rng(seed)

    def value(shape: Any, dtype: str) -> Any:
        dims = [batch if d is None else int(d) for d in shape]
        if "int" in dtype:
            return rng.integers(0, int_high, size=dims).astype(dtype)
        return rng.standard_normal(dims).astype(dtype)

    symbolic = getattr(model, "_inputs_struct", None)
    if symbolic is None:
        shapes = getattr(model, "_build_shapes_dict", None) or {}
        if len(shapes) != 1:
            raise ValueError(f"cannot tell the input shape of {model.name}: {shapes}")
        (shape,) = shapes.values()
        return value(shape, "float32")
    return keras.tree.map_structure(lambda t: value(t.shape, t.dtype), symbolic)


def random_targets(model: Any, y_pred: Any, *, seed: int = 1) -> Any:
    """Seeded random targets for `y_pred`: class labels for sparse losses, floats otherwise."""
    import keras
    import numpy as np

    rng = np.random.default_rng(seed)
    losses = model.loss

    def loss_for(key: Any, index: int) -> Any:
        if isinstance(losses, dict):
            return losses.get(key)
        if isinstance(losses, (list, tuple)):
            return losses[index]
        return losses

    def target(prediction: Any, loss: Any) -> Any:
        shape = tuple(prediction.shape)
        kind = _loss_name(loss)
        if "sparse" in kind:
            return rng.integers(0, shape[-1], size=shape[:-1]).astype("int32")
        if "crossentropy" in kind or "hinge" in kind:
            return rng.random(shape).astype("float32")
        return rng.standard_normal(shape).astype("float32")

    if isinstance(y_pred, dict):
        return {key: target(v, loss_for(key, i)) for i, (key, v) in enumerate(y_pred.items())}
    if isinstance(y_pred, (list, tuple)):
        return [target(v, loss_for(None, i)) for i, v in enumerate(y_pred)]
    return keras.tree.map_structure(lambda v: target(v, loss_for(None, 0)), y_pred)


def keras_verdicts(
    model: Any, x: Any = None, y: Any = None, *, loss: Any = None, batch: int = BATCH
) -> KerasVerdicts:
    """TensorFlow's verdict on every weight of `model` for its Keras training objective.

    `loss` compiles an uncompiled model first (what `gradcheck model.keras --loss mse` means).
    `x` and `y` default to `random_inputs` / `random_targets`.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    if loss is not None:
        model.compile(optimizer="sgd", loss=loss)
    if getattr(model, "_compile_loss", None) is None:
        raise ValueError(f"{model.name} is not compiled with a loss")
    if x is None:
        x = random_inputs(model, batch=batch)
    if y is None:
        y = random_targets(model, model(x, training=True))

    weights = _unique(model.weights)
    trainable_ids = {id(w) for w in model.trainable_weights}
    names = [w.path for w in weights]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"weight paths must be unique, these repeat: {repeated}")
    watched = [w.value for w in weights]
    with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        for variable in watched:
            tape.watch(variable)
        y_pred = model(x, training=True)
        total = model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)
        data_only = model._compile_loss(y, y_pred)  # CompileLoss: compiled losses only
    none = tf.UnconnectedGradients.NONE
    total_gradients = tape.gradient(total, watched, unconnected_gradients=none)
    data_gradients = tape.gradient(data_only, watched, unconnected_gradients=none)
    del tape

    def verdict(weight: Any, gradient: Any) -> str:
        if id(weight) not in trainable_ids:
            return "frozen"
        if gradient is None:
            return "none"
        return "gradient" if np.any(tf.convert_to_tensor(gradient).numpy() != 0) else "zero"

    layers = {
        attribute: [w.path for w in value.weights]
        for attribute, value in vars(model).items()
        if isinstance(value, keras.layers.Layer) and not attribute.startswith("_")
    }
    return KerasVerdicts(
        full={n: verdict(w, g) for n, w, g in zip(names, weights, total_gradients)},
        data_only={n: verdict(w, g) for n, w, g in zip(names, weights, data_gradients)},
        layers=layers,
    )


def _loss_name(loss: Any) -> str:
    if loss is None:
        return ""
    if isinstance(loss, str):
        return loss.lower()
    name = getattr(loss, "name", None) or getattr(loss, "__name__", None) or type(loss).__name__
    return f"{name} {type(loss).__name__}".lower()


def _unique(items: Any) -> list[Any]:
    seen: set[int] = set()
    kept = []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            kept.append(item)
    return kept


# The child program: argv = [script, model attribute, out path]. Runs with cwd = the repository.
_CHILD = r"""
import os, runpy, sys, traceback

script, attribute, out_path = sys.argv[1:4]
try:
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    namespace = runpy.run_path(script, run_name="gradcheck_oracle")
    sys.path.insert(0, os.getcwd())
    from tests.keras_models.keras_oracle import keras_verdicts

    text = keras_verdicts(namespace[attribute]).to_json()
except BaseException:
    text = '{"error": ' + __import__("json").dumps(traceback.format_exc()) + "}"
with open(out_path, "w") as out:
    out.write(text)
"""


class OracleError(RuntimeError):
    """TensorFlow could not answer: the script raised, the model is not compiled, ..."""


@dataclass
class PendingKerasVerdicts:
    """An oracle question on a script, running in a subprocess; `result()` waits for it."""

    description: str
    process: forked_python.ForkedProcess
    tmp: tempfile.TemporaryDirectory[str]
    out_path: str

    def result(self) -> KerasVerdicts:
        try:
            _, stderr = self.process.communicate(timeout=TIMEOUT_SECONDS)
            try:
                text = Path(self.out_path).read_text()
            except OSError:
                raise OracleError(
                    f"{self.description}: exited with {self.process.returncode} without an "
                    f"answer\n{stderr[-4000:]}"
                ) from None
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise OracleError(f"{self.description}: timed out after {TIMEOUT_SECONDS} s") from None
        finally:
            self.tmp.cleanup()
        if '"error"' in text[:10]:
            raise OracleError(f"{self.description}:\n{json.loads(text)['error']}")
        return KerasVerdicts.from_json(text)


def start_script_verdicts(script: str | os.PathLike[str], attribute: str) -> PendingKerasVerdicts:
    """Start `keras_verdicts(<the script's module attribute>)` in a fresh Python process."""
    tmp = tempfile.TemporaryDirectory(prefix="gradcheck-keras-oracle-")
    out_path = os.path.join(tmp.name, "verdicts.json")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    process = forked_python.start(["-c", _CHILD, os.fspath(script), attribute, out_path], env, ROOT)
    return PendingKerasVerdicts(f"Keras oracle on {script} ({attribute})", process, tmp, out_path)
