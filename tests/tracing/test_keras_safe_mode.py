"""A Keras file that holds Python code (a Lambda layer): one sentence of gradcheck's own, with
gradcheck's option, not Keras's advice about its Python API."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.errors import GradcheckError, error_line
from gradcheck_cli.tracing.keras_models import load_keras_file


@pytest.mark.heavy  # Keras in the test process: over 10 s on a busy machine
def test_a_lambda_layer_is_refused_in_one_clean_sentence(tmp_path: Path) -> None:
    import keras
    from keras import layers

    inputs = keras.Input((3,), name="x")
    doubled = layers.Lambda(lambda t: t * 2.0, name="doubled")(inputs)
    model = keras.Model(inputs, layers.Dense(1, name="out")(doubled))
    model.compile(optimizer="sgd", loss="mse")
    path = tmp_path / "lambda.keras"
    model.save(str(path))

    with pytest.raises(GradcheckError) as raised:
        load_keras_file(path, None, verify=False, unsafe=False)
    message = str(raised.value)
    assert message == error_line(  # the line as printed: a deep tmp path is shortened
        f"{path} holds a Lambda layer, and loading it would run code stored in the file, which "
        "Keras's safe mode refuses; if you trust the file, pass --unsafe-deserialization "
        "(unsafe_deserialization=True from Python)"
    )
