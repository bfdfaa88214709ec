"""A few hundred mutated saved_model.pb files: each gets a verdict or one clear error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fuzz_saved_model import fuzz

sys.path.insert(0, str(Path(__file__).parent))
from zoo import Zoo  # noqa: E402


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tensorflow as tf

    path = tmp_path_factory.mktemp("fuzz") / "zoo"
    tf.saved_model.save(Zoo(), str(path), options=tf.saved_model.SaveOptions(save_debug_info=True))
    return path


@pytest.mark.parametrize("seed", range(4))
def test_mutated_saved_models_never_crash(zoo_dir: Path, seed: int) -> None:
    problems = fuzz(zoo_dir, cases=75, seed=seed)
    assert not problems, "\n\n".join(problems[:5])
