"""Two hundred and forty mutated saved_model.pb files: each gets a verdict or one clear error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.fuzz_saved_model import fuzz

sys.path.insert(0, str(Path(__file__).parent))
from zoo import Zoo  # noqa: E402

SAMPLE = Path(__file__).parents[2] / "sample_models" / "write_savedmodel.py"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The zoo (every way of getting gradient) and the documented sample model."""
    import tensorflow as tf

    spec = importlib.util.spec_from_file_location("gradcheck_sample_savedmodel", SAMPLE)
    assert spec is not None and spec.loader is not None
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    folder = tmp_path_factory.mktemp("fuzz")
    options = tf.saved_model.SaveOptions(save_debug_info=True)
    tf.saved_model.save(Zoo(), str(folder / "zoo"), options=options)
    tf.saved_model.save(sample.model, str(folder / "sample"), options=options)
    return {"zoo": folder / "zoo", "sample": folder / "sample"}


@pytest.mark.parametrize(("model", "seed"), [("zoo", 0), ("zoo", 1), ("sample", 2), ("sample", 3)])
def test_mutated_saved_models_never_crash(models: dict[str, Path], model: str, seed: int) -> None:
    problems = fuzz(models[model], cases=60, seed=seed)
    assert not problems, "\n\n".join(problems[:5])
