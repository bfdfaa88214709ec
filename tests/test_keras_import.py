"""`--import` makes a `.keras` file with registered custom layers loadable, in safe mode; the
verdicts then agree with TensorFlow's tape on the loaded model."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from gradcheck_cli.cli import command
from gradcheck_cli.config import parse_table
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.tracing.keras_models import (
    import_user_code,
    without_warnings_gradcheck_causes,
)
from tests.cli_runs import invoke
from tests.keras_models.keras_oracle import ROOT

MODULE = "tests.keras_models.custom_layers"


def test_custom_layer_file_loads_with_import_and_agrees_with_tensorflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import keras

    from tests.keras_models.custom_layers import gated_model
    from tests.keras_models.keras_oracle import keras_verdicts

    path = tmp_path / "gated.keras"
    gated_model().save(path)
    monkeypatch.chdir(ROOT)  # where MODULE is importable from
    # In this process: the workers fork from the warm launcher.
    code, out, err = invoke(command, [str(path), "--import", MODULE, "--format", "json"])
    # TensorFlow's verdicts on the model as Keras loads it back, in safe mode.
    expected = keras_verdicts(keras.saving.load_model(path, safe_mode=True))
    report = json.loads(out)
    dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
    assert dead == expected.dead == {"gated/gate", "gated/spare"}, err
    assert "Warning" not in err  # what gradcheck's own loading makes Keras say is left out
    assert code == 1
    code, out, err = invoke(command, [str(path), "--format", "json"])
    assert code == 2
    assert "'GatedDense'" in err and f"--import {MODULE}" in err
    assert len(err.strip().splitlines()) == 1


def test_only_the_warnings_gradcheck_causes_are_left_out() -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with without_warnings_gradcheck_causes():
            warnings.warn(
                "Skipping variable loading for optimizer 'adam', because it has 1 variables "
                "whereas the saved optimizer has 5 variables.",
                UserWarning,
                stacklevel=1,
            )
            warnings.warn(
                "The structure of `inputs` doesn't match the expected structure.",
                UserWarning,
                stacklevel=1,
            )
            warnings.warn("the user's own layer warns", UserWarning, stacklevel=1)
        warnings.warn("Skipping variable loading for optimizer 'sgd'", UserWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == [
        "the user's own layer warns",
        "Skipping variable loading for optimizer 'sgd'",  # outside gradcheck's own calls
    ]


def test_a_failing_import_names_the_module_and_its_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken_layers.py"
    broken.write_text("raise RuntimeError('no GPU here')\n")
    for entry, words in (
        ("gradcheck_no_such_module", "ModuleNotFoundError"),
        (str(broken), "RuntimeError: no GPU here"),
        (str(tmp_path / "absent.py"), "no such file"),
    ):
        with pytest.raises(GradcheckError) as caught:
            import_user_code((entry,))
        message = str(caught.value)
        assert message.startswith(f"--import {entry}: ") and words in message
        assert "\n" not in message


def test_imports_come_from_the_config_file_then_the_flags(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    settings = parse_table({"import": ["my_layers", "src/layers.py"]}, config)
    assert settings.imports == ("my_layers", str(tmp_path / "src" / "layers.py"))
    flags = CheckOptions(imports=("more_layers", "my_layers"))
    assert settings.options_for("m.keras", flags).imports == (
        "my_layers",
        str(tmp_path / "src" / "layers.py"),
        "more_layers",
    )
    with pytest.raises(GradcheckError, match="import must be"):
        parse_table({"import": "my_layers"}, config)


@pytest.mark.parametrize("named", ["os", "builtins", "numpy"])
def test_advice_never_names_a_module_the_file_chose(
    named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A .keras file is a zip that anyone may write: its config names the module of a custom
    # class, and gradcheck must not tell the user to import that module if it is not theirs.
    import zipfile

    from tests.keras_models.custom_layers import gated_model

    original = tmp_path / "gated.keras"
    gated_model().save(original)
    crafted = tmp_path / "crafted.keras"
    with zipfile.ZipFile(original) as source, zipfile.ZipFile(crafted, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                data = data.replace(MODULE.encode(), named.encode())
                assert named.encode() in data
            target.writestr(item, data)
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke(command, [str(crafted), "--format", "json"])
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "'GatedDense'" in line and "--import MODULE" in line
    assert f"--import {named}" not in line
