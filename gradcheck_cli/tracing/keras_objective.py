"""A Keras model's own training objective as a traceable function: compiled losses with their
weights plus `model.losses` (regularizers, add_loss), on inputs and targets shaped like the model's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.tracing.function_tracing import RUN_INSTEAD, run_hint
from gradcheck_cli.tracing.keras_weights import imported_kerases


@dataclass
class Tape:
    """One GradientTape.gradient call of a model's own train_step."""

    target: Any  # concrete function: the train_step, returning what this tape differentiates
    sources: list[Any]  # the variables this tape differentiates it against


@dataclass
class KerasObjective:
    full: Any  # concrete function: what Keras's fit() minimises (a train_step's last tape)
    data_only: Any | None  # the same without model.losses, when there are any
    tapes: list[Tape] = field(default_factory=list)  # a train_step's tapes, in call order


def keras_of(model: Any) -> Any:
    """The Keras `model` belongs to: Keras 3 (`keras`) or Keras 2 (`tf_keras`, which is also
    `tf.keras` under TF_USE_LEGACY_KERAS); None if neither. Never imports either to find out."""
    return next((keras for keras in imported_kerases() if isinstance(model, keras.Model)), None)


def is_keras_2(model: Any) -> bool:
    return keras_of(model) is sys.modules.get("tf_keras") is not None


def _compiled(model: Any) -> bool:
    """Whether `model` was compiled with a loss (Keras 3's `_compile_loss`, Keras 2's
    `compiled_loss`)."""
    if is_keras_2(model):
        return getattr(model, "compiled_loss", None) is not None
    return getattr(model, "_compile_loss", None) is not None


def keras_objective(
    model: Any, loss: str | None, name: str, script: Path | None = None
) -> KerasObjective:
    """Trace `model`'s objective; `loss` names a Keras loss for an uncompiled model (a Keras
    file's). `script`: the script whose attribute `name` holds the model (`--loss model`); what
    cannot be traced then also names `gradcheck run`, which checks the script as it trains."""
    if script is None:
        return _objective(model, loss, name, None)
    try:
        return _objective(model, loss, name, script)
    except GradcheckError as error:
        raise GradcheckError(f"{error}{run_hint(script, f'; or {RUN_INSTEAD}')}") from None


def _objective(model: Any, loss: str | None, name: str, script: Path | None) -> KerasObjective:
    import tensorflow as tf

    keras = keras_of(model)
    keras_2 = is_keras_2(model)
    compiled = _compiled(model)
    if loss is None and _overrides_train_step(model):
        # A train_step trains on what it asks its tapes for, compiled loss or not (a GAN
        # compiles optimizers and a loss function of its own).
        tapes = train_step_tapes(model, name)
        return KerasObjective(tapes[-1].target, None, tapes)
    if loss is not None:
        try:
            loss_function = keras.losses.get(loss)
        except (ValueError, TypeError):
            # `--loss model` on a Keras file: its compiled objective needs no --loss.
            compiled_already = f"; {name} is compiled, so leave --loss out to check its own loss"
            raise GradcheckError(
                f"{loss!r} is not a Keras loss; name one such as 'mse' or "
                "'sparse_categorical_crossentropy'"
                f"{compiled_already if compiled else ''}"
            ) from None
    elif not compiled and not _overrides_compute_loss(model) and script is not None:
        raise GradcheckError(
            f"{name} in {display_path(script)} is not compiled with a loss, so it has no "
            "objective to check: compile it with one where the script builds it "
            f"({name}.compile(optimizer, loss=...)), or name a loss function of the script with "
            "--loss NAME"
        )
    elif not compiled and not _overrides_compute_loss(model):
        raise GradcheckError(
            f"{name} is not compiled, so it has no loss; compile it, or name a Keras loss with "
            "--loss (e.g. --loss mse or --loss sparse_categorical_crossentropy)"
        )
    else:
        loss_function = None
    fitted = fit_batch_spec(model)
    if fitted is not None:  # the batches fit() trained on: their targets, or none
        x_specs, y_specs = _unpacked_batch(fitted)
    else:
        x_specs = _input_specs(model, name)
        y_specs = _target_specs(model, loss, x_specs)
    signature = [x_specs] if y_specs is None else [x_specs, y_specs]

    def predict_and_targets(x: Any, y: Any) -> tuple[Any, Any]:
        return model(x, training=True), y

    @tf.function(input_signature=signature, autograph=False)
    def objective(x: Any, y: Any = None) -> Any:
        y_pred, y = predict_and_targets(x, y)
        if loss_function is not None:
            total = tf.reduce_mean(loss_function(y, y_pred))
            regularization = [tf.cast(term, total.dtype) for term in model.losses]
            return tf.add_n([total, *regularization]) if regularization else total
        if keras_2:  # Keras 2's compute_loss takes no `training`
            return model.compute_loss(x=x, y=y, y_pred=y_pred)
        return model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)

    @tf.function(input_signature=signature, autograph=False)
    def data_loss(x: Any, y: Any = None) -> Any:
        y_pred, y = predict_and_targets(x, y)
        if loss_function is not None:
            return tf.reduce_mean(loss_function(y, y_pred))
        if keras_2:  # the compiled losses without model.losses
            return model.compiled_loss(y, y_pred, None)
        return model._compile_loss(y, y_pred, None)

    data_only = None
    if model.losses and not _overrides_compute_loss(model):
        data_only = data_loss.get_concrete_function()
    return KerasObjective(objective.get_concrete_function(), data_only)


def _target_specs(model: Any, loss: str | None, x_specs: Any) -> Any:
    """Specs of targets shaped like the model's outputs on inputs of `x_specs`."""
    import tensorflow as tf
    from tensorflow.python.util import nest

    y_sample = model(tf.nest.map_structure(_sample, x_specs), training=False)
    sparse = _sparse_outputs(model, loss, y_sample)
    return nest.map_structure_with_paths(lambda path, t: _target_spec(t, path in sparse), y_sample)


def _input_specs(model: Any, name: str) -> Any:
    import tensorflow as tf

    inputs = getattr(model, "_inputs_struct", None)
    if inputs is None:
        inputs = _functional_inputs(model)
    if inputs is not None:
        return tf.nest.map_structure(
            lambda t: tf.TensorSpec((None, *t.shape[1:]), t.dtype or "float32"), inputs
        )
    recorded = _first_call_spec(model)
    if recorded is not None:
        return recorded
    built = getattr(model, "_build_input_shape", None)  # a built Keras 2 subclassed model
    if built is not None and not isinstance(built, (dict, list)):
        shape = tf.TensorShape(built)
        if shape.rank:
            return tf.TensorSpec((None, *shape[1:]), "float32")
    shapes = getattr(model, "_build_shapes_dict", None)
    if shapes and len(shapes) == 1:  # what build() was given: a shape, or a dict or list of them
        (shape,) = shapes.values()
        specs = _specs_of_shapes(shape)
        if specs is not None:
            return specs
    raise GradcheckError(
        f"{name} has no known input shape: build it (call it once on a batch, or give it a "
        "keras.Input) so gradcheck can trace its loss"
    )


def fit_batch_spec(model: Any) -> Any | None:
    """The spec of the batches `fit` handed the model's train_step (any batch size), read from
    the train function `fit` traced (Keras 2's, or the one Keras 3 wraps); None before fit."""
    import tensorflow as tf

    train_function = getattr(model, "train_function", None)
    functions = [train_function]
    closure = getattr(train_function, "__closure__", None) or ()
    for cell in closure:
        with suppress(ValueError):  # a cell not assigned yet
            functions.append(cell.cell_contents)
    for function in functions:
        if not isinstance(function, tf.types.experimental.PolymorphicFunction):
            continue
        for concrete in function._list_all_concrete_functions():
            for spec in tf.nest.flatten(
                concrete.structured_input_signature, expand_composites=False
            ):
                # A tf.data IteratorSpec keeps the batch's spec as `_element_spec` only.
                element = getattr(spec, "_element_spec", None)
                if element is not None:
                    return tf.nest.map_structure(_any_batch, element)
    return None


def _any_batch(spec: Any) -> Any:
    import tensorflow as tf

    if isinstance(spec, tf.TensorSpec) and spec.shape.rank:
        return tf.TensorSpec((None, *spec.shape[1:]), spec.dtype)
    return spec


def _unpacked_batch(batch: Any) -> tuple[Any, Any]:
    """The inputs and targets (None if it has none) in a batch of (inputs[, targets[, sample
    weights]]), as Keras unpacks it."""
    if isinstance(batch, tuple) and 1 <= len(batch) <= 3:
        return batch[0], batch[1] if len(batch) > 1 else None
    return batch, None


def _first_call_spec(model: Any) -> Any:
    """The specs of the inputs Keras 2 recorded at the model's first call (its save spec:
    structure, dtypes and shapes, any batch; a model loaded from a SavedModel has the one it
    was saved with), when that call took one input (a tensor, or a dict or list of them, as a
    subclassed model called once on its dummy inputs); None otherwise, and for Keras 3, which
    records none."""
    save_spec = getattr(model, "save_spec", None)
    if not callable(save_spec):
        return None
    try:
        recorded = save_spec(dynamic_batch=True)
    except Exception:  # a model of a Keras that records it otherwise, or not yet
        return None
    if not isinstance(recorded, tuple) or len(recorded) != 2:
        return None
    args, kwargs = recorded
    # A model revived from a SavedModel records its `training` argument too, as None.
    if not args or any(a is not None for a in args[1:]) or any(kwargs.values()):
        return None
    return args[0]


def _specs_of_shapes(shape: Any) -> Any:
    """TensorSpecs (float32, any batch) of the shape, or the dict or list of shapes, a Keras 3
    model was built with (the batch `fit` saw); None for anything else."""
    import tensorflow as tf

    if isinstance(shape, dict):
        specs = {key: _specs_of_shapes(value) for key, value in shape.items()}
        return None if any(spec is None for spec in specs.values()) else specs
    if isinstance(shape, (tuple, list)) and shape:
        if all(d is None or isinstance(d, int) for d in shape):
            return tf.TensorSpec((None, *shape[1:]), "float32")
        items = [_specs_of_shapes(item) for item in shape]
        return None if any(item is None for item in items) else type(shape)(items)
    return None


def _functional_inputs(model: Any) -> Any:
    try:
        return model.inputs
    except AttributeError:
        return None


def _sample(spec: Any) -> Any:
    import tensorflow as tf

    shape = [2 if d is None else d for d in spec.shape]
    if spec.dtype.is_floating:
        return tf.random.normal(shape, dtype=spec.dtype, seed=0)
    return tf.zeros(shape, spec.dtype)


def _sparse_outputs(model: Any, loss: str | None, y_sample: Any) -> set[str]:
    """Paths of the outputs whose loss takes integer class labels as targets."""
    from tensorflow.python.util import nest

    configured: Any = loss if loss is not None else getattr(model, "loss", None)
    paths = [p for p, _ in nest.flatten_with_joined_string_paths(y_sample)]
    sparse = set()
    for path in paths:
        entry = configured.get(path.split("/")[0]) if isinstance(configured, dict) else configured
        if isinstance(configured, (list, tuple)):
            index = int(path.split("/")[0] or 0) if path.split("/")[0].isdecimal() else 0
            entry = configured[index] if index < len(configured) else None
        label = entry if isinstance(entry, str) else type(entry).__name__ if entry else ""
        if "sparse" in label.lower():
            sparse.add(path)
    return sparse


def _target_spec(tensor: Any, sparse: bool) -> Any:
    import tensorflow as tf

    shape = (None, *tensor.shape[1:])
    if sparse:
        return tf.TensorSpec(shape[:-1], tf.int32)
    return tf.TensorSpec(shape, tensor.dtype)


def _overrides_compute_loss(model: Any) -> bool:
    keras = keras_of(model)
    return keras is not None and type(model).compute_loss is not keras.Model.compute_loss


def _overrides_train_step(model: Any) -> bool:
    keras = keras_of(model)
    return keras is not None and type(model).train_step is not keras.Model.train_step


def train_step_tapes(model: Any, name: str) -> list[Tape]:
    """Trace the model's own train_step once per tape that differentiates variables, each
    returning what that tape differentiates; gradients and optimizer steps are left out."""
    from gradcheck_cli.tracing.traced import error_summary

    failures: list[Exception] = []
    # fit() traces train_step with autograph; without it first, so that Python control flow
    # on tensors stays as the user wrote it unless the step needs autograph to trace at all.
    attempts = [
        (data, autograph) for data in _step_data_specs(model, name) for autograph in (False, True)
    ]
    for data, autograph in attempts:
        try:
            last, captured = _trace_step(model, data, -1, autograph)
        except GradcheckError:
            raise
        except Exception as error:  # not the data this train_step takes: try the next shape
            failures.append(error)
            continue
        targets = [
            _trace_step(model, data, index, autograph)[0] for index in range(len(captured) - 1)
        ]
        return [Tape(target, sources) for target, (_, sources) in zip([*targets, last], captured)]
    raise GradcheckError(
        f"{name}'s train_step cannot be traced on a batch shaped like its inputs: "
        f"{error_summary(failures[0])}"
    )


def _step_data_specs(model: Any, name: str) -> list[Any]:
    """What train_step may be given, likeliest first: (inputs, targets) for a compiled model,
    else the inputs alone; a model without inputs of its own (a GAN): each sub-model's inputs."""
    keras = keras_of(model)
    fitted = fit_batch_spec(model)
    specs: list[Any] = [] if fitted is None else [fitted]
    try:
        inputs = _input_specs(model, name)
    except GradcheckError as error:
        inputs, missing = None, error
    if inputs is not None:
        try:
            pair = [(inputs, _target_specs(model, None, inputs))]
        except Exception:  # a model whose call() is not its training path
            pair = []
        specs += [*pair, inputs] if _compiled(model) else [inputs, *pair]
    for value in vars(model).values():
        if isinstance(value, keras.Model) and value is not model:
            with suppress(GradcheckError):
                specs.append(_input_specs(value, name))
    if not specs:
        raise missing
    # fit() hands train_step a batch as it is: a one-input model's batch is one tensor.
    return [s[0] if isinstance(s, (list, tuple)) and len(s) == 1 else s for s in specs]


def _trace_step(
    model: Any, data_spec: Any, index: int, autograph: bool
) -> tuple[Any, list[tuple[Any, Any]]]:
    """The train_step on `data_spec`, returning the target of its `index`-th tape that
    differentiates variables; with every such (target, sources) in call order."""
    import tensorflow as tf

    captured: list[tuple[Any, Any]] = []
    original = tf.GradientTape.gradient

    def capture(tape: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        if all(backing_variable(s) is None for s in tf.nest.flatten(sources)):
            # A gradient the loss itself uses (a gradient penalty): TensorFlow computes it.
            return original(tape, target, sources, *args, **kwargs)
        captured.append((target, sources))
        return tf.nest.map_structure(tf.zeros_like, sources)

    @tf.function(input_signature=[data_spec], autograph=autograph)
    def step(data: Any) -> Any:
        model.train_step(data)
        if not captured:
            raise GradcheckError(
                "the model's train_step never calls GradientTape.gradient on variables, so "
                "gradcheck cannot tell what it trains on"
            )
        targets = tf.nest.flatten(captured[index][0])
        # TensorFlow differentiates several targets as their sum.
        return targets[0] if len(targets) == 1 else tf.add_n([tf.reduce_sum(t) for t in targets])

    with _steps_skipped(model, capture):
        return step.get_concrete_function(), captured


@contextmanager
def _steps_skipped(model: Any, capture: Any) -> Iterator[None]:
    """GradientTape.gradient replaced by `capture`, and every optimizer of the model idle."""
    import tensorflow as tf

    def no_step(*args: Any, **kwargs: Any) -> None:
        return None

    optimizers = [getattr(model, "optimizer", None), *vars(model).values()]
    idle = [o for o in optimizers if _is_optimizer(o)]
    original = tf.GradientTape.gradient
    tf.GradientTape.gradient = capture  # type: ignore[method-assign]
    for optimizer in idle:
        for method in ("apply_gradients", "apply"):
            setattr(optimizer, method, no_step)
    try:
        yield
    finally:
        tf.GradientTape.gradient = original  # type: ignore[method-assign]
        for optimizer in idle:
            for method in ("apply_gradients", "apply"):
                with suppress(AttributeError):
                    delattr(optimizer, method)


def _is_optimizer(value: Any) -> bool:
    """Whether `value` is a Keras 3 or a Keras 2 optimizer (its legacy ones too)."""
    kinds = []
    for keras in imported_kerases():
        kinds.append(keras.optimizers.Optimizer)
        legacy = getattr(keras.optimizers, "legacy", None)
        if legacy is not None and hasattr(legacy, "Optimizer"):
            kinds.append(legacy.Optimizer)
    return bool(kinds) and isinstance(value, tuple(kinds))


def backing_variable(value: Any) -> Any | None:
    """The tf.Variable a tape source stands for (a Keras variable's backing one), or None."""
    import tensorflow as tf

    if isinstance(value, tf.Variable):
        return value
    backing = getattr(value, "value", None)
    return backing if isinstance(backing, tf.Variable) else None
