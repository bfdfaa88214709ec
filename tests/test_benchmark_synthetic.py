"""The benchmark's synthetic SavedModels are real: TensorFlow loads each shape, and its gradients
agree with gradcheck's verdicts (and with the verdicts the generator promises)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import synthetic, templates
from gradcheck_cli import check
from tests.golden import assert_reports_match_golden, fixed_machine, report_text
from tests.tf_oracle_inprocess import dead_names, tf_verdicts


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[synthetic.Shape, Path]:
    """Each shape at about 50 ops, from templates written in this process."""
    root = tmp_path_factory.mktemp("synthetic")
    cache = root / "cache"
    return {
        shape: synthetic.write(
            shape, 50, root / shape.value, cache, templates.save_templates
        ).parent
        for shape in synthetic.Shape
    }


def test_tensorflow_agrees_with_gradcheck_on_every_shape(
    models: dict[synthetic.Shape, Path],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tensorflow as tf

    fixed_machine(monkeypatch)
    texts = {}
    expected_dead = {name for name, status in synthetic.EXPECTED.items() if status != "ok"}
    for shape, path in models.items():
        report = check(path, loss=synthetic.LOSS)
        statuses = {v.variable.name: v.status.value for v in report.variables}
        assert statuses == synthetic.EXPECTED, shape
        texts[shape.value] = report_text(report, path.parent)
        loaded = tf.saved_model.load(str(path))
        variables = [getattr(loaded, name) for name in synthetic.EXPECTED]
        tensorflow = tf_verdicts(loaded.loss, variables, [tf.constant(0.7)])
        assert set(tensorflow) == set(statuses), shape
        assert dead_names(tensorflow) == expected_dead, (shape, tensorflow)
    assert_reports_match_golden(texts, "synthetic-50.json", request)


def test_sizes_follow_the_requested_op_count(
    tmp_path: Path,
    models: dict[synthetic.Shape, Path],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """... and what gradcheck says of each shape at 1k ops stays as the golden holds it."""
    fixed_machine(monkeypatch)
    cache = next(iter(models.values())).parent / "cache"
    texts = {}
    for shape in synthetic.Shape:
        small = synthetic.write(shape, 1000, tmp_path / f"{shape.value}-1k", cache)
        large = synthetic.write(shape, 4000, tmp_path / f"{shape.value}-4k", cache)
        ratio = large.stat().st_size / small.stat().st_size
        assert 3 < ratio < 5, (shape, ratio)
        texts[shape.value] = report_text(check(small.parent, loss=synthetic.LOSS), tmp_path)
    assert_reports_match_golden(texts, "synthetic-1k.json", request)
