"""What Keras tells about a script's weights: their Keras paths, trainability, attribute paths
and the line that constructed their layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradcheck_cli.loaders.keras_weights import keras_weights, track_layer_construction


def test_weights_are_named_by_keras_and_by_the_attribute_that_holds_them(tmp_path: Path) -> None:
    import keras

    script = tmp_path / "model.py"
    script.write_text("import keras\n")
    original = keras.layers.Layer.__init__
    try:
        sites = track_layer_construction(script)
        encoder = keras.layers.Dense(2, name="encoder")  # the construction line
        frozen = keras.layers.Dense(2, name="frozen")
    finally:
        keras.layers.Layer.__init__ = original  # type: ignore[method-assign]
    frozen.trainable = False
    encoder.build((None, 2))
    frozen.build((None, 2))
    found = keras_weights({"layers": [encoder, frozen], "_private": encoder}, sites)
    by_path: dict[str, Any] = {}
    for weight in encoder.weights + frozen.weights:
        by_path[weight.path] = (
            found.info[id(weight.value)],
            found.attributes[id(weight.value)],
            found.constructed_at[id(weight.value)],
        )
    (kernel_info, kernel_attribute, kernel_site) = by_path["encoder/kernel"]
    assert kernel_info == ("encoder/kernel", True)
    assert kernel_attribute == "layers[0].kernel"
    assert kernel_site.file == __file__
    assert "the construction line" in Path(__file__).read_text().splitlines()[kernel_site.line - 1]
    assert by_path["frozen/bias"][:2] == (("frozen/bias", False), "layers[1].bias")


def test_a_script_that_never_mentions_keras_is_not_tracked(tmp_path: Path) -> None:
    script = tmp_path / "model.py"
    script.write_text("import tensorflow as tf\n")
    assert track_layer_construction(script) == {}
    assert track_layer_construction(tmp_path / "missing.py") == {}
