"""What a crafted repository can and cannot make a check do. Each payload writes a marker file
when it runs: the marker must never appear."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.cli import command
from tests.cli_runs import cli_result

# Modules a worker imports, or may import, while it loads a model: planted in the working
# folder of a check, each would run in the worker if that folder were on its sys.path.
SHADOWED = ("pickle", "numpy", "h5py", "absl", "google")


def _plant(folder: Path, marker_dir: Path) -> None:
    for name in SHADOWED:
        marker = marker_dir / f"ran_{name}"
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import keras
    import tensorflow as tf

    where = tmp_path_factory.mktemp("models")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    model.save(where / "model.keras")

    class Module(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(tf.ones([3]), name="w")

        @tf.function(input_signature=[])
        def loss(self) -> tf.Tensor:
            return tf.reduce_sum(self.w * 2.0)

    module = Module()
    tf.saved_model.save(module, str(where / "saved"), signatures={"loss": module.loss})
    return {"keras": where / "model.keras", "saved": where / "saved"}


@pytest.mark.parametrize(
    ("model", "extra"), [("keras", ()), ("saved", ("--loss", "loss", "--verify"))]
)
def test_modules_in_the_working_folder_never_run_in_the_worker(
    model: str,
    extra: tuple[str, ...],
    models: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repository = tmp_path / "repository"
    markers = tmp_path / "markers"
    repository.mkdir()
    markers.mkdir()
    _plant(repository, markers)
    monkeypatch.chdir(repository)
    for warm in ("always", "never"):  # a forked warm worker, and a fresh one
        monkeypatch.setenv("GRADCHECK_WARM_WORKERS", warm)
        result = cli_result(command, [str(models[model]), "--no-cache", *extra])
        assert result.exit_code == 0, (warm, result.stdout, result.stderr)
        assert list(markers.iterdir()) == [], warm
