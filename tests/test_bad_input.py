"""Every input gradcheck cannot analyse gets one clear line on stderr and exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.cli import ExitCode, command
from gradcheck_cli.protos.tf_protos import protos
from tests.cli_runs import Ran, gradcheck_json, invoke
from tests.error_documents import assert_error_document

BAD = Path(__file__).parent / "scripts" / "bad"

SCRIPT_CASES = {
    "syntax_error.py": ("Python cannot parse the script (SyntaxError)", []),
    "import_error.py": ("raised ModuleNotFoundError", []),
    "hard_exit.py": ("ended the process", []),
    "endless.py": ("did not finish within 8 s", ["--timeout", "8"]),
    "needs_arguments.py": ("command-line arguments", []),
    "no_variables.py": ("no trainable variable to check", ["--loss", "loss"]),
    "vector_loss.py": ("not a scalar", ["--loss", "loss"]),
}


@pytest.fixture(scope="module")
def script_runs() -> dict[str, Ran]:
    return {
        name: gradcheck_json(str(BAD / name), *extra) for name, (_, extra) in SCRIPT_CASES.items()
    }


def _assert_one_clear_error(
    code: int, out: str, err: str, expected: str, *, json_of: str | None = None
) -> None:
    """`json_of`: the model whose error object `--format json` wrote; else stdout is empty."""
    assert code == ExitCode.ERROR, err
    if json_of is None:
        assert out == ""
    else:
        assert_error_document(out, err, json_of)
    assert expected in err
    assert "Traceback" not in err
    ours = [line for line in err.splitlines() if line.startswith("gradcheck:")]
    assert len(ours) == 1, err


@pytest.mark.parametrize("name", SCRIPT_CASES)
def test_bad_scripts(name: str, script_runs: dict[str, Ran]) -> None:
    run = script_runs[name]
    _assert_one_clear_error(
        run.returncode, run.stdout, run.stderr, SCRIPT_CASES[name][0], json_of=str(BAD / name)
    )


def test_vector_loss_is_checked_when_asked_and_refused_in_one_line_from_the_cache() -> None:
    run = gradcheck_json(str(BAD / "vector_loss.py"), "--loss", "loss", "--sum-loss")
    assert run.returncode in (ExitCode.CLEAN, ExitCode.DEAD_VARIABLES), run.stderr
    assert run.stdout.startswith("{")
    # The trace is cached now; the same check without --sum-loss is still refused in one line,
    # with no word about a cached result it did not report.
    run = gradcheck_json(str(BAD / "vector_loss.py"), "--loss", "loss")
    _assert_one_clear_error(
        run.returncode, run.stdout, run.stderr, "not a scalar", json_of=str(BAD / "vector_loss.py")
    )


def _cli(*args: str) -> Ran:
    return invoke(command, args)


def _saved_model_dir(tmp_path: Path, payload: bytes, name: str = "saved_model.pb") -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / name).write_bytes(payload)
    return folder


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"", "holds no MetaGraph"),
        (b"\x0a\xff\xff\xff\xff\x0f", "not a readable SavedModel"),
        (b"\x00\x01garbage" * 50, "not a readable SavedModel"),
    ],
)
def test_empty_truncated_or_corrupt_saved_model(
    tmp_path: Path, payload: bytes, expected: str
) -> None:
    _assert_one_clear_error(
        *_cli(str(_saved_model_dir(tmp_path, payload)), "--loss", "loss"), expected
    )


def test_saved_model_without_functions_or_signatures(tmp_path: Path) -> None:
    saved_model = protos().saved_model_pb2.SavedModel()
    saved_model.meta_graphs.add().meta_info_def.tags.append("serve")
    folder = _saved_model_dir(tmp_path, saved_model.SerializeToString())
    _assert_one_clear_error(*_cli(str(folder)), "no function or tensor that could be a loss")


def test_chunked_saved_model(tmp_path: Path) -> None:
    folder = _saved_model_dir(tmp_path, b"chunks", name="saved_model.cpb")
    _assert_one_clear_error(*_cli(str(folder)), "chunked SavedModel")


def test_unknown_op_is_a_finding_not_a_silent_ok(tmp_path: Path) -> None:
    import tensorflow as tf

    class Model(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable([1.0, 2.0], name="w")

        @tf.function(input_signature=[tf.TensorSpec([2])])
        def loss(self, x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(tf.tanh(x * self.w))

    path = tmp_path / "saved"
    tf.saved_model.save(Model(), str(path))
    saved_model = protos().saved_model_pb2.SavedModel()
    saved_model.ParseFromString((path / "saved_model.pb").read_bytes())
    for function in saved_model.meta_graphs[0].graph_def.library.function:
        for node in function.node_def:
            if node.op == "Tanh":
                node.op = "TanhFromAFutureTensorFlow"
    (path / "saved_model.pb").write_bytes(saved_model.SerializeToString())
    code, out, err = _cli(str(path), "--loss", "loss", "--format", "json")
    assert code in (ExitCode.CLEAN, ExitCode.DEAD_VARIABLES), err
    assert '"GC001"' in out and "TanhFromAFutureTensorFlow" in out


@pytest.mark.parametrize(
    ("text", "reason"),
    [('{"cells": [', ""), ("[" * 100_000 + "]" * 100_000, ": its JSON is nested too deep")],
    ids=["truncated", "nested"],
)
def test_a_notebook_that_is_not_json_is_one_line_in_run_mode(
    text: str, reason: str, tmp_path: Path
) -> None:
    from gradcheck_cli.cli import run_command

    notebook = tmp_path / "train.ipynb"
    notebook.write_text(text)
    code, out, err = invoke(run_command, [str(notebook)])
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"gradcheck: error: {notebook}: not a valid Jupyter notebook{reason}")


@pytest.mark.parametrize("name", ["model.keras", "model.h5", "model.py", "train.ipynb"])
def test_a_fifo_or_device_named_as_a_model_is_refused_without_waiting(
    name: str, tmp_path: Path
) -> None:
    import os

    from gradcheck_cli.cli import run_command

    fifo, device = tmp_path / name, tmp_path / f"zero-{name}"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    device.symlink_to("/dev/zero")
    for path in (fifo, device):
        runs = [invoke(run_command, [str(path)])]
        if not name.endswith(".ipynb"):
            runs.append(invoke(command, [str(path)]))
        for code, out, err in runs:
            assert (code, out) == (2, ""), err
            (line,) = err.splitlines()
            assert "not a regular file" in line, line


@pytest.mark.heavy  # writes a Keras file, and gradcheck loads it with Keras
def test_a_keras_file_whose_layer_name_keras_refuses_as_a_scope_is_the_model_s_problem(
    tmp_path: Path,
) -> None:
    import zipfile

    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, name="dense")])
    model.compile("sgd", "mse")
    model.save(tmp_path / "saved.keras")
    crafted = tmp_path / "model.keras"
    with zipfile.ZipFile(tmp_path / "saved.keras") as saved, zipfile.ZipFile(crafted, "w") as out:
        for item in saved.namelist():
            data = saved.read(item)
            if item == "config.json":
                data = data.replace(b'"dense"', b'"dense bad"')  # no valid scope name
            out.writestr(item, data)
    code, out, err = _cli(str(crafted), "--loss", "mse")
    _assert_one_clear_error(code, out, err, "holds a model that Keras cannot run")
    assert "internal error" not in err and "x1b" not in err and "\x1b" not in err
    assert "'dense bad' is not a valid scope name" in err


@pytest.mark.heavy  # writes a Keras weights file, and gradcheck asks Keras to load it
def test_a_weights_only_file_is_told_what_to_pass_instead(tmp_path: Path) -> None:
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.save_weights(tmp_path / "model.weights.h5")
    code, out, err = _cli(str(tmp_path / "model.weights.h5"), "--loss", "mse")
    _assert_one_clear_error(code, out, err, "holds weights only, no model")
    assert "model.save('model.keras')" in err and "gradcheck run train.py" in err
