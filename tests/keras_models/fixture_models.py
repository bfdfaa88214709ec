"""Small compiled Keras models for the `.keras` / `.h5` / export tests, one builder per case.

Every layer is named, so weight paths do not depend on how many layers the process built before.
What each model means (dead, frozen, trained only by a penalty) is TensorFlow's to say, not
these docstrings': the tests always compare gradcheck with `keras_oracle`.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).parent / "scripts"
FEATURES = 6


def sequential_penalised() -> Any:
    """Sequential, mse; a kernel L2 penalty on a layer the data also trains; BatchNorm stats."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            layers.Dense(
                8,
                activation="relu",
                name="seq_hidden",
                kernel_regularizer=keras.regularizers.L2(0.01),
            ),
            layers.BatchNormalization(name="seq_norm"),
            layers.Dense(3, name="seq_out"),
        ],
        name="seq",
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def sequential_frozen_first() -> Any:
    """Sequential, mse, first layer frozen: for the legacy `.h5` format."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            layers.Dense(8, activation="relu", name="h5_hidden"),
            layers.Dense(2, name="h5_out"),
        ],
        name="h5_seq",
    )
    model.get_layer("h5_hidden").trainable = False
    # A loss object: Keras 3.15 cannot reload the string "mse" from an .h5 training config.
    model.compile(optimizer="adam", loss=keras.losses.MeanSquaredError())
    return model


def functional_argmax_gate() -> Any:
    """Functional, mse: `gate` only feeds an argmax that indexes an embedding; `body` frozen."""
    import keras
    from keras import layers, ops

    inputs = keras.Input((FEATURES,), name="x")
    index = ops.argmax(layers.Dense(4, name="gate")(inputs), axis=-1)
    looked_up = layers.Embedding(4, 3, name="lookup")(index)
    body = layers.Dense(5, name="body")(inputs)
    joined = layers.Concatenate(name="join")([looked_up, body])
    outputs = layers.Dense(1, name="gated_out")(joined)
    model = keras.Model(inputs, outputs, name="argmax_gate")
    model.get_layer("body").trainable = False
    model.compile(optimizer="adam", loss="mse")
    return model


def functional_activity_side() -> Any:
    """Functional, two outputs: `side` has no loss, only an ActivityRegularization penalty."""
    import keras
    from keras import layers

    inputs = keras.Input((FEATURES,), name="x")
    main = layers.Dense(1, name="main_out")(inputs)
    side = layers.Dense(4, name="side")(inputs)
    # L2, not L1: an L1 gradient is a sum of signs, exactly zero on some random batches.
    penalised = layers.ActivityRegularization(l2=0.01, name="side_penalty")(side)
    model = keras.Model(inputs, {"main": main, "side": penalised}, name="activity_side")
    model.compile(optimizer="adam", loss={"main": "mse", "side": None})
    return model


def two_heads() -> Any:
    """Acceptance A: outputs `{"main", "aux"}` compiled with `loss={"main": "mse", "aux": None}`."""
    import keras
    from keras import layers

    inputs = keras.Input((FEATURES,), name="x")
    trunk = layers.Dense(16, activation="relu", name="trunk")(inputs)
    main = layers.Dense(1, name="main_head")(trunk)
    aux_hidden = layers.Dense(8, activation="relu", name="aux_hidden")(trunk)
    aux = layers.Dense(2, name="aux_head")(aux_hidden)
    model = keras.Model(inputs, {"main": main, "aux": aux}, name="two_heads")
    model.compile(optimizer="adam", loss={"main": "mse", "aux": None})
    return model


AUX_LAYERS = ("aux_hidden", "aux_head")


def twin_towers() -> Any:
    """Two towers from one seeded builder (equal weights by construction), a loss on one."""
    import keras
    from keras import layers

    def tower(name: str) -> Any:
        init = keras.initializers.GlorotUniform(seed=5)
        return keras.Sequential(
            [
                layers.Dense(6, "relu", kernel_initializer=init, name=f"{name}_hidden"),
                layers.Dense(2, kernel_initializer=init, name=f"{name}_out"),
            ],
            name=name,
        )

    inputs = keras.Input((FEATURES,), name="x")
    outputs = {"query": tower("query")(inputs), "spare": tower("spare")(inputs)}
    model = keras.Model(inputs, outputs, name="twin_towers")
    model.compile(optimizer="adam", loss={"query": "mse", "spare": None})
    return model


def uncompiled_gate() -> Any:
    """Functional and NOT compiled (needs `--loss mse`); `u_gate` only feeds an argmax."""
    import keras
    from keras import layers, ops

    inputs = keras.Input((FEATURES,), name="x")
    index = ops.argmax(layers.Dense(3, name="u_gate")(inputs), axis=-1)
    looked_up = layers.Embedding(3, 1, name="u_lookup")(index)
    outputs = layers.Add(name="u_add")([layers.Dense(1, name="u_out")(inputs), looked_up])
    return keras.Model(inputs, outputs, name="uncompiled_gate")


def hand_pooler(pooler_l2: float | None) -> Any:
    """Acceptance D by hand: encoder, MLM head, and a pooler whose output has no loss."""
    import keras
    from keras import layers

    regularizer = None if pooler_l2 is None else keras.regularizers.L2(pooler_l2)
    tokens = keras.Input((8,), dtype="int32", name="token_ids")
    encoded = layers.Dense(16, activation="relu", name="hand_encoder")(
        layers.Embedding(50, 16, name="hand_embedding")(tokens)
    )
    logits = layers.Dense(50, name="hand_mlm_head")(encoded)
    pooled = layers.Dense(
        16, activation="tanh", name="hand_pooler", kernel_regularizer=regularizer
    )(layers.GlobalAveragePooling1D(name="hand_mean")(encoded))
    model = keras.Model(tokens, {"mlm": logits, "pooled": pooled}, name="hand_bert")
    model.compile(
        optimizer="adam",
        loss={"mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "pooled": None},
    )
    return model


POOLER = "hand_pooler"


def bert_pooler() -> Any:
    """Acceptance D with keras_hub: the BERT of scripts/bert_pooler.py (no regularizer)."""
    build_model = runpy.run_path(str(SCRIPTS / "bert_models.py"))["build_model"]
    return build_model()


def frozen_backbone() -> Any:
    """Acceptance C: the model of scripts/frozen_backbone.py."""
    build_model = runpy.run_path(str(SCRIPTS / "frozen_backbone.py"))["build_model"]
    return build_model()


def exported_gate(directory: Path) -> tuple[Any, Any, Any]:
    """An `ExportArchive` with a `loss` endpoint computing the model's own objective from (x, y).

    The model has a frozen `ex_trunk`, an `ex_gate` that only feeds an argmax, and an L2
    penalty on `ex_head`. Returns (model, x, y): the endpoint's loss on (x, y) is the objective.
    """
    import keras
    import numpy as np
    import tensorflow as tf
    from keras import layers, ops

    inputs = keras.Input((FEATURES,), name="x")
    trunk = layers.Dense(8, activation="relu", name="ex_trunk")(inputs)
    index = ops.argmax(layers.Dense(3, name="ex_gate")(inputs), axis=-1)
    looked_up = layers.Embedding(3, 8, name="ex_lookup")(index)
    joined = layers.Add(name="ex_add")([trunk, looked_up])
    outputs = layers.Dense(2, name="ex_head", kernel_regularizer=keras.regularizers.L2(0.01))(
        joined
    )
    model = keras.Model(inputs, outputs, name="exported_gate")
    model.get_layer("ex_trunk").trainable = False
    model.compile(optimizer="adam", loss="mse")

    def loss(x: Any, y: Any) -> Any:
        return model.compute_loss(x=x, y=y, y_pred=model(x, training=True), training=True)

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "loss",
        loss,
        input_signature=[
            tf.TensorSpec((None, FEATURES), tf.float32, name="x"),
            tf.TensorSpec((None, 2), tf.float32, name="y"),
        ],
    )
    archive.write_out(str(directory), verbose=False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, FEATURES)).astype("float32")
    y = rng.standard_normal((4, 2)).astype("float32")
    return model, x, y
