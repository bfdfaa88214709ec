"""A Keras fit whose layer `spare` is built but never called: its kernel and bias are dead.

With GRADCHECK_TEST_WATCH set ("stop" or "continue") the script calls gradcheck_cli.watch() at
its top; GRADCHECK_TEST_OUT names a JSON file that gets which weights kept their first value
and, when watch() stopped the fit, its reports as gradcheck's JSON (the script catches the
stop to write them, and raises it on). Without GRADCHECK_TEST_OUT nothing catches the stop.
"""

import json
import os

import gradcheck_cli

MODE = os.environ.get("GRADCHECK_TEST_WATCH")
if MODE:
    gradcheck_cli.watch(on_dead=MODE)

import keras  # noqa: E402
import numpy as np  # noqa: E402

inputs = keras.Input((4,))
hidden = keras.layers.Dense(3, name="used")(inputs)
model = keras.Model(inputs, keras.layers.Dense(1, name="out")(hidden))
model.spare = keras.layers.Dense(3, name="spare")
model.spare.build((None, 4))
model.compile("sgd", "mse")
start = [weight.numpy() for weight in model.weights]


def write(**facts):
    same = [bool((first == weight.numpy()).all()) for first, weight in zip(start, model.weights)]
    if os.environ.get("GRADCHECK_TEST_OUT"):
        with open(os.environ["GRADCHECK_TEST_OUT"], "w") as out:
            json.dump({"same": same, **facts}, out)


def fit():
    model.fit(np.ones((8, 4)), np.ones((8, 1)), epochs=2, verbose=0)


if not os.environ.get("GRADCHECK_TEST_OUT"):
    fit()  # as a user's script trains: nothing catches gradcheck's stop
else:
    try:
        fit()
    except gradcheck_cli.DeadVariablesError as error:
        from gradcheck_cli.reporters import Format, render

        write(reports=json.loads(render(error.reports, Format.JSON)))
        raise
write()
print("trained")
