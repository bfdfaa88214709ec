"""What Keras tells about a script's weights: their Keras paths, trainability, attribute paths
and the line that constructed their layer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gradcheck_cli.tracing.keras_weights import KerasWeights, keras_weights, track_keras_weights

LINES = Path(__file__).read_text().splitlines()


@contextmanager
def tracking(tmp_path: Path) -> Iterator[KerasWeights]:
    import keras

    layer = keras.layers.Layer
    original = (layer.__init__, layer.add_weight)
    try:
        yield track_keras_weights()
    finally:
        layer.__init__, layer.add_weight = original  # type: ignore[method-assign]


def _line_of(found: KerasWeights, weight: Any) -> str:
    site = found.constructed_at[id(weight.value)]
    assert site is not None and site.file == __file__, site
    return LINES[site.line - 1]


def test_weights_are_named_by_keras_and_by_the_attribute_that_holds_them(tmp_path: Path) -> None:
    import keras

    with tracking(tmp_path) as found:
        encoder = keras.layers.Dense(2, name="encoder")  # the construction line
        frozen = keras.layers.Dense(2, name="frozen")
        frozen.trainable = False
        encoder.build((None, 2))
        frozen.build((None, 2))
    keras_weights({"layers": [encoder, frozen], "_private": encoder}, found)
    kernel = id(encoder.kernel.value)
    assert found.info[kernel] == ("encoder/kernel", True)
    assert found.attributes[kernel] == "layers[0].kernel"
    assert "the construction line" in _line_of(found, encoder.kernel)
    assert found.info[id(frozen.bias.value)] == ("frozen/bias", False)
    assert found.attributes[id(frozen.bias.value)] == "layers[1].bias"


def _dense(units: int) -> Any:
    import keras

    return keras.layers.Dense(units)  # the helper's line


def test_each_weight_is_created_at_the_line_that_constructed_its_own_layer(
    tmp_path: Path,
) -> None:
    """Functional, Sequential and subclassed alike; not the model's line, not super().__init__,
    and a library layer's own sublayers at the library layer's line."""
    import keras

    class Tower(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = [_dense(4) for _ in range(2)]
            self.head = keras.layers.Dense(1)  # the head's line
            self.scale = self.add_weight(shape=(), initializer="ones")

        def call(self, x: Any) -> Any:
            for block in self.blocks:
                x = block(x)
            return self.head(x) * self.scale

    with tracking(tmp_path) as found:
        inputs = keras.Input(shape=(3,))
        hidden = keras.layers.Dense(4)(inputs)  # the first layer's line
        outputs = keras.layers.Dense(2)(hidden)  # the second layer's line
        functional = keras.Model(inputs, outputs)
        sequential = keras.Sequential(
            [
                keras.layers.Dense(4),  # the first listed layer
                keras.layers.Dense(2),  # the second listed layer
            ]
        )
        tower = Tower()  # the tower's line
        attention = keras.layers.MultiHeadAttention(num_heads=1, key_dim=2)  # attention's line
        x = keras.ops.ones((1, 3))
        sequential(x)
        tower(x)
        attention(keras.ops.ones((1, 2, 3)), keras.ops.ones((1, 2, 3)))
    keras_weights({"functional": functional}, found)

    first, second = functional.layers[1:]
    assert "the first layer's line" in _line_of(found, first.kernel)
    assert "the second layer's line" in _line_of(found, second.bias)
    assert found.attributes[id(second.kernel.value)] == "functional.layers[2].kernel"
    listed = ["the first listed layer", "the second listed layer"]
    for layer, comment in zip(sequential.layers, listed):
        assert comment in _line_of(found, layer.kernel)
        assert comment in _line_of(found, layer.bias)
    for block in tower.blocks:
        assert "the helper's line" in _line_of(found, block.kernel)
    assert "the head's line" in _line_of(found, tower.head.kernel)
    assert "the tower's line" in _line_of(found, tower.scale)
    assert attention.weights
    for weight in attention.weights:
        assert "attention's line" in _line_of(found, weight)


def test_nothing_is_tracked_before_a_layer_is_made(tmp_path: Path) -> None:
    # Keras is watched from its import on (here: already imported), at no cost before that.
    with tracking(tmp_path) as found:
        assert not found.variables and not found.layer_sites
