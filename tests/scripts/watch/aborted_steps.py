"""Training steps that fail after they asked for gradients, before any weight changed: every
variable's gradient is None (the loss reads an argmax), so Keras's optimizer raises "No gradients
provided for any variable", or the step's own code fails on a None first. Each step runs once
plainly and once under gradcheck's Keras callback or watch(); Keras 3, or Keras 2 (tf_keras) when
GRADCHECK_TEST_KERAS is 2.

stderr: `-- NAME` before each checked step, `-- raised NAME` and the traceback of what it raised
once it is caught. The facts (the error each step raised, plainly and checked, and the variables
TensorFlow's tape gives None) are written as JSON to GRADCHECK_TEST_OUT; then a last eager step,
watched without a `with` block, runs uncaught and fails on a None gradient in its own code, so the
process ends with that error's traceback.
"""

import contextlib
import json
import os
import sys
import traceback

LEGACY = os.environ.get("GRADCHECK_TEST_KERAS") == "2"
if LEGACY:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from hook_state import hooks  # noqa: E402
from tensorflow.python.eager.polymorphic_function import (  # noqa: E402
    atomic_function,
    polymorphic_function,
)
from tensorflow.python.ops import resource_variable_ops  # noqa: E402

import gradcheck_cli  # noqa: E402

if LEGACY:
    import tf_keras as keras  # noqa: E402
    from tf_keras.src.optimizers import optimizer as optimizers  # noqa: E402
    from tf_keras.src.optimizers.legacy import optimizer_v2  # noqa: E402

    OWNERS = [optimizers.Optimizer, optimizer_v2.OptimizerV2, keras.layers.Layer, keras.Model]
else:
    import keras  # noqa: E402
    from keras.src.backend.tensorflow import trainer  # noqa: E402
    from keras.src.optimizers import base_optimizer  # noqa: E402

    OWNERS = [base_optimizer.BaseOptimizer, keras.layers.Layer, trainer.TensorFlowTrainer]
OWNERS += [
    tf.GradientTape,
    atomic_function.AtomicFunction,
    polymorphic_function.Function,
    resource_variable_ops.ResourceVariable,
    resource_variable_ops.BaseResourceVariable,
]

x, y = np.ones((8, 4), "float32"), np.ones((8, 1), "float32")


def argmax_loss(y_true, y_pred):
    # ArgMax has no gradient: no variable before it gets one.
    return tf.reduce_mean(tf.cast(tf.argmax(y_pred, axis=-1), "float32") - y_true[:, 0])


class CustomStep(keras.Model):
    def train_step(self, data):
        inputs, targets = data
        with tf.GradientTape() as tape:
            loss = argmax_loss(targets, self(inputs, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {"loss": loss}


def model_of(kind=keras.Model):
    # Constant weights: Keras's message, which may show their values, is the same every time.
    constant = keras.initializers.Constant(0.5)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(5, name="body", kernel_initializer=constant)(inputs)
    return kind(inputs, keras.layers.Dense(3, name="head", kernel_initializer=constant)(hidden))


def compiled(kind=keras.Model):
    model = model_of(kind)
    model.compile(keras.optimizers.SGD(0.1), loss=argmax_loss)
    return model


def eager_apply(model):
    optimizer = keras.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = argmax_loss(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def clipped_step(model):
    # The step's own code fails on a None gradient before the optimizer sees it.
    optimizer = keras.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = argmax_loss(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [tf.clip_by_norm(g, 1.0) for g in grads]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def fit(model, callback):
    model.fit(x, y, epochs=1, verbose=0, callbacks=[callback] if callback else [])


def callback_fit(kind, on_dead):
    def step(checked):
        fit(compiled(kind), gradcheck_cli.keras_callback(on_dead=on_dead) if checked else None)

    return step


def watched(run, on_dead="stop"):
    def step(checked):
        if checked:
            gradcheck_cli.watch(on_dead=on_dead)
        run()

    return step


def in_a_block(run):
    def step(checked):
        with gradcheck_cli.watch() if checked else contextlib.nullcontext():
            run()

    return step


STEPS = {
    "callback builtin": callback_fit(keras.Model, "stop"),
    "callback custom": callback_fit(CustomStep, "continue"),
    "watch builtin": watched(lambda: fit(compiled(), None)),
    "watch custom": watched(lambda: fit(compiled(CustomStep), None), on_dead="continue"),
    "watch traced clip": watched(lambda: tf.function(clipped_step)(model_of())),
    "watch block clip": in_a_block(lambda: clipped_step(model_of())),
    "watch eager": watched(lambda: eager_apply(model_of())),
}
# Run uncaught at the end, with watch() called without a `with` block: the step's own code fails
# on a None gradient before any optimizer sees it, and the error ends the program.
LAST = "watch eager clip"


def raised(step, checked):
    try:
        step(checked)
    except Exception as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return error, [type(error).__name__, lines[-1] if lines else ""]
    raise AssertionError("the step did not fail")


def none_gradients():
    """What TensorFlow's own tape gives None, on the loss every step takes."""
    model = model_of()
    with tf.GradientTape() as tape:
        loss = argmax_loss(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    return sorted(
        f"{layer.name}/{weight.name.split(':')[0].split('/')[-1]}"
        for layer in model.layers
        for weight in layer.weights
        for variable, grad in zip(model.trainable_variables, grads)
        if variable is weight and grad is None
    )


before = hooks(OWNERS)
facts = {"none": none_gradients(), "plain": {}, "checked": {}}
steps = {**STEPS, LAST: watched(lambda: clipped_step(model_of()))}
for name, step in steps.items():
    facts["plain"][name] = raised(step, checked=False)[1]
for name, step in STEPS.items():
    print(f"-- {name}", file=sys.stderr, flush=True)
    error, facts["checked"][name] = raised(step, checked=True)
    print(f"-- raised {name}", file=sys.stderr, flush=True)
    traceback.print_exception(error)
    sys.stderr.flush()
facts["hooks_gone"] = hooks(OWNERS) == before
with open(os.environ["GRADCHECK_TEST_OUT"], "w") as out:
    json.dump(facts, out)
print(f"-- {LAST}", file=sys.stderr, flush=True)
steps[LAST](True)
print("trained")
