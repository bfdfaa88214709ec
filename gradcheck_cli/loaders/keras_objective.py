"""A Keras model's own training objective as a traceable function: compiled losses with their
weights plus `model.losses` (regularizers, add_loss), on inputs and targets shaped like the model's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradcheck_cli.errors import GradcheckError


@dataclass
class KerasObjective:
    full: Any  # concrete function: what Keras's fit() minimises
    data_only: Any | None  # the same without model.losses, when there are any


def keras_objective(model: Any, loss: str | None, name: str) -> KerasObjective:
    """Trace `model`'s objective; `loss` names a Keras loss for an uncompiled model."""
    import keras
    import tensorflow as tf

    compiled = getattr(model, "_compile_loss", None) is not None
    if loss is not None:
        try:
            loss_function = keras.losses.get(loss)
        except (ValueError, TypeError):
            raise GradcheckError(
                f"{loss!r} is not a Keras loss; name one such as 'mse' or "
                "'sparse_categorical_crossentropy'"
            ) from None
    elif not compiled:
        raise GradcheckError(
            f"{name} is not compiled, so it has no loss; compile it, or name a Keras loss with "
            "--loss (e.g. --loss mse or --loss sparse_categorical_crossentropy)"
        )
    else:
        loss_function = None
    x_specs = _input_specs(model, name)
    sample = tf.nest.map_structure(_sample, x_specs)
    y_sample = model(sample, training=False)
    sparse = _sparse_outputs(model, loss, y_sample)
    from tensorflow.python.util import nest

    y_specs = nest.map_structure_with_paths(
        lambda path, t: _target_spec(t, path in sparse), y_sample
    )

    def predict_and_targets(x: Any, y: Any) -> tuple[Any, Any]:
        return model(x, training=True), y

    @tf.function(input_signature=[x_specs, y_specs], autograph=False)
    def objective(x: Any, y: Any) -> Any:
        y_pred, y = predict_and_targets(x, y)
        if loss_function is not None:
            total = tf.reduce_mean(loss_function(y, y_pred))
            regularization = [tf.cast(term, total.dtype) for term in model.losses]
            return tf.add_n([total, *regularization]) if regularization else total
        return model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)

    @tf.function(input_signature=[x_specs, y_specs], autograph=False)
    def data_loss(x: Any, y: Any) -> Any:
        y_pred, y = predict_and_targets(x, y)
        if loss_function is not None:
            return tf.reduce_mean(loss_function(y, y_pred))
        return model._compile_loss(y, y_pred, None)

    if loss is None and _overrides_train_step(model):
        return KerasObjective(
            _train_step_loss(model, x_specs, y_specs),
            None,
        )
    has_extra_losses = bool(model.losses)
    overrides = type(model).compute_loss is not keras.Model.compute_loss
    data_only = None
    if has_extra_losses and not overrides:
        data_only = data_loss.get_concrete_function()
    return KerasObjective(objective.get_concrete_function(), data_only)


def _input_specs(model: Any, name: str) -> Any:
    import tensorflow as tf

    inputs = getattr(model, "_inputs_struct", None)
    if inputs is None:
        inputs = _functional_inputs(model)
    if inputs is not None:
        return tf.nest.map_structure(
            lambda t: tf.TensorSpec((None, *t.shape[1:]), t.dtype or "float32"), inputs
        )
    shapes = getattr(model, "_build_shapes_dict", None)
    if shapes and len(shapes) == 1:
        (shape,) = shapes.values()
        if isinstance(shape, (tuple, list)) and shape and not isinstance(shape[0], (tuple, list)):
            return tf.TensorSpec((None, *shape[1:]), "float32")
    raise GradcheckError(
        f"{name} has no known input shape: build it (call it once on a batch, or give it a "
        "keras.Input) so gradcheck can trace its loss"
    )


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
            index = int(path.split("/")[0] or 0) if path.split("/")[0].isdigit() else 0
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


def _overrides_train_step(model: Any) -> bool:
    step = type(model).train_step
    return not getattr(step, "__qualname__", "").startswith("TensorFlowTrainer.")


def _train_step_loss(model: Any, x_specs: Any, y_specs: Any) -> Any:
    """Trace the model's own train_step and return what it asks its GradientTape to
    differentiate; the gradient and the optimizer step themselves are left out."""
    import tensorflow as tf

    targets: list[Any] = []
    original_gradient = tf.GradientTape.gradient

    def capture(tape: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        targets.append(target)
        return tf.nest.map_structure(lambda s: tf.zeros_like(s), sources)

    def no_step(*args: Any, **kwargs: Any) -> None:
        return None

    @tf.function(input_signature=[x_specs, y_specs], autograph=False)
    def step(x: Any, y: Any) -> Any:
        model.train_step((x, y))
        if not targets:
            raise GradcheckError(
                "the model's train_step never calls GradientTape.gradient, so gradcheck cannot "
                "tell what it trains on"
            )
        return targets[-1]

    optimizer = getattr(model, "optimizer", None)
    patched = [(tf.GradientTape, "gradient", original_gradient)]
    tf.GradientTape.gradient = capture  # type: ignore[method-assign]
    if optimizer is not None:
        for method in ("apply_gradients", "apply"):
            if hasattr(optimizer, method):
                patched.append((optimizer, method, getattr(optimizer, method)))
                setattr(optimizer, method, no_step)
    try:
        return step.get_concrete_function()
    finally:
        for owner, attribute, value in patched:
            if owner is tf.GradientTape:
                setattr(owner, attribute, value)
            else:
                delattr(owner, attribute)
