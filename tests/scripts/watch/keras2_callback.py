"""Keras 2 (tf.keras under TF_USE_LEGACY_KERAS) fits with gradcheck's Keras callback: a clean
model, then a model whose layer `spare` is never called, let go on and then stopped. Prints one
JSON line of what happened."""

import json
import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from hook_state import hooks  # noqa: E402
from tensorflow.python.eager.polymorphic_function import atomic_function  # noqa: E402
from tensorflow.python.ops import resource_variable_ops  # noqa: E402

import gradcheck_cli  # noqa: E402

keras = tf.keras
OWNERS = [
    tf.GradientTape,
    atomic_function.AtomicFunction,
    resource_variable_ops.ResourceVariable,
    resource_variable_ops.BaseResourceVariable,
    keras.layers.Layer,
    keras.Model,
]


x, y = np.ones((8, 4), "float32"), np.ones((8, 1), "float32")


def model_with(spare):
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1, name="out")(inputs))
    if spare:
        model.spare = keras.layers.Dense(3, name="spare")
        model.spare.build((None, 4))
    model.compile("sgd", "mse")
    return model


def same(model, start):
    return [bool((first == w.numpy()).all()) for first, w in zip(start, model.weights)]


def none_gradients(model):
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, model(x))
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    # Named as gradcheck names them: the layer, then the weight (Keras 2 names a weight built
    # outside a call `kernel:0`).
    names = {
        id(weight): f"{layer.name}/{weight.name.split(':')[0].split('/')[-1]}"
        for layer in [*model.layers, model.spare]
        for weight in layer.weights
    }
    return sorted(names[id(v)] for v, g in zip(variables, grads) if g is None)


before = hooks(OWNERS)
facts = {"callback": type(gradcheck_cli.keras_callback()).__mro__[2].__module__}
for name, spare, on_dead in (("clean", False, "stop"), ("continue", True, "continue")):
    model = model_with(spare)
    start = [w.numpy() for w in model.weights]
    print(f"-- {name}", file=sys.stderr, flush=True)
    callback = gradcheck_cli.keras_callback(on_dead=on_dead)
    history = model.fit(x, y, epochs=2, verbose=0, callbacks=[callback])
    facts[name] = {"epochs": len(history.history["loss"]), "same": same(model, start)}
model = model_with(True)
start = [w.numpy() for w in model.weights]
print("-- stop", file=sys.stderr, flush=True)
try:
    model.fit(x, y, epochs=2, verbose=0, callbacks=[gradcheck_cli.keras_callback()])
except gradcheck_cli.DeadVariablesError as error:
    dead = sorted(v.name for report in error.reports for v in report.dead)
    facts["stop"] = {"error": str(error), "dead": dead, "same": same(model, start)}
facts["none"] = none_gradients(model)
facts["hooks_gone"] = hooks(OWNERS) == before
print(json.dumps(facts))
