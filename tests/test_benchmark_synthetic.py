"""The benchmark's synthetic SavedModels are real: TensorFlow loads each shape, and its gradients
agree with gradcheck's verdicts (and with the verdicts the generator promises)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import synthetic
from gradcheck_cli import check
from tests import forked_python
from tests.oracle import dead_names, start_dead_in_savedmodel


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[synthetic.Shape, Path]:
    """Each shape at about 50 ops, from templates that a process forked from TensorFlow wrote."""
    root = tmp_path_factory.mktemp("synthetic")
    return {
        shape: synthetic.write(
            shape, 50, root / shape.value, root / "cache", forked_python.run
        ).parent
        for shape in synthetic.Shape
    }


def test_tensorflow_agrees_with_gradcheck_on_every_shape(
    models: dict[synthetic.Shape, Path],
) -> None:
    pending = {shape: start_dead_in_savedmodel(str(path), "loss") for shape, path in models.items()}
    expected_dead = {name for name, status in synthetic.EXPECTED.items() if status != "ok"}
    for shape, path in models.items():
        report = check(path, loss=synthetic.LOSS)
        statuses = {v.variable.name: v.status.value for v in report.variables}
        assert statuses == synthetic.EXPECTED, shape
        tensorflow = pending[shape].result()
        assert set(tensorflow) == set(statuses), shape
        assert dead_names(tensorflow) == expected_dead, (shape, tensorflow)


def test_sizes_follow_the_requested_op_count(
    tmp_path: Path, models: dict[synthetic.Shape, Path]
) -> None:
    cache = next(iter(models.values())).parent / "cache"
    for shape in synthetic.Shape:
        small = synthetic.write(shape, 1000, tmp_path / f"{shape.value}-1k", cache)
        large = synthetic.write(shape, 4000, tmp_path / f"{shape.value}-4k", cache)
        ratio = large.stat().st_size / small.stat().st_size
        assert 3 < ratio < 5, (shape, ratio)
