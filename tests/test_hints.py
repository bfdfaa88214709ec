"""The errors of a plain check that point at the command that fits: a script that trains when
imported, an eager loss and a `--loss model` that cannot be traced all name `gradcheck run`,
and `gradcheck run` on the same script then gives the report."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gradcheck_cli.cli import command, run_command
from gradcheck_cli.run import ExitCode
from tests import forked_python
from tests.cli_runs import Ran, invoke

RUN_INSTEAD = "check the script as it trains, stopped at its first gradient request, with"

SCRIPTS = {
    # Keras's fit at import, on a model whose every weight is cut: stopped at its gradient
    # request, before the optimizer would raise.
    "fit_at_import.py": """
        import numpy as np
        import keras

        inputs = keras.Input((4,))
        hidden = keras.layers.Dense(3, name="hidden")(inputs)
        outputs = keras.ops.stop_gradient(keras.layers.Dense(1, name="head")(hidden))
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="sgd", loss="mse")
        model.fit(np.ones((8, 4)), np.ones((8, 1)), epochs=1, verbose=0)
    """,
    # An eager training loop at import, stopped at its first gradient request: it never
    # reaches the failure of its own below.
    "loop_then_fails.py": """
        import tensorflow as tf

        w = tf.Variable(1.0, name="w")
        optimizer = tf.keras.optimizers.SGD(0.1)
        for step in range(2):
            with tf.GradientTape() as tape:
                loss = (w - 3.0) ** 2
            optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
        raise RuntimeError("checkpoint folder missing")
    """,
    # TF1: `minimize` raises TensorFlow's gradient error while the graph is built.
    "tf1_minimize.py": """
        import tensorflow as tf

        tf.compat.v1.disable_eager_execution()
        w = tf.compat.v1.get_variable("w", shape=[], initializer=tf.compat.v1.ones_initializer())
        loss = tf.cast(tf.cast(w, tf.int32), tf.float32) ** 2
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    """,
    # A script whose loss is a number the tape computed at import.
    "eager_loss.py": """
        import tensorflow as tf

        w = tf.Variable(1.0, name="w")
        with tf.GradientTape() as tape:
            loss = tf.round(w) ** 2
    """,
    # A model compiled only under __main__, which a plain check does not run.
    "compiled_in_main.py": """
        import numpy as np
        import keras

        inputs = keras.Input((4,))
        outputs = keras.layers.Dense(1, name="head")(inputs)
        model = keras.Model(inputs, outputs)

        if __name__ == "__main__":
            model.compile(optimizer="sgd", loss="mse")
            model.fit(np.ones((8, 4)), np.ones((8, 1)), epochs=1, verbose=0)
    """,
    # A subclassed model that nothing has built yet.
    "unbuilt_model.py": """
        import keras


        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.head = keras.layers.Dense(1)

            def call(self, x):
                return self.head(x)


        model = Net()
        model.compile(optimizer="sgd", loss="mse")
    """,
}

PLAIN = {
    "fit_at_import.py": [],
    "loop_then_fails.py": [],
    "tf1_minimize.py": [],
    "eager_loss.py": ["--loss", "loss"],
    "compiled_in_main.py": ["--loss", "model"],
    "unbuilt_model.py": ["--loss", "model"],
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hints")
    written = {}
    for name, source in SCRIPTS.items():
        written[name] = folder / name
        written[name].write_text(textwrap.dedent(source).lstrip())
    return written


@pytest.fixture(scope="module")
def plain_runs(scripts: dict[str, Path]) -> dict[str, Ran]:
    """`gradcheck SCRIPT ...` on each script, once."""
    return {name: invoke(command, [scripts[name], *PLAIN[name]]) for name in SCRIPTS}


def _error_line(ran: Ran) -> str:
    """The one line gradcheck wrote: exit 2, nothing on stdout, nothing else on stderr."""
    assert (ran.returncode, ran.stdout) == (ExitCode.ERROR, ""), ran.stderr
    (line,) = ran.stderr.splitlines()
    return line


def test_a_script_that_fits_at_import_is_stopped_and_names_gradcheck_run(
    plain_runs: dict[str, Ran], scripts: dict[str, Path]
) -> None:
    script = scripts["fit_at_import.py"]
    assert _error_line(plain_runs["fit_at_import.py"]) == (
        f"gradcheck: error: {script} trains when imported: it asks for gradients at {script}:9; "
        "gradcheck stopped it there, before any weight changed: "
        f"{RUN_INSTEAD} `gradcheck run {script}`"
    )


def test_the_command_it_names_reports_the_dead_weights(scripts: dict[str, Path]) -> None:
    code, out, err = invoke(run_command, [scripts["fit_at_import.py"]], env={"NO_COLOR": "1"})
    assert code == ExitCode.DEAD_VARIABLES, err
    assert "hidden/kernel" in out and "head/kernel" in out


def test_a_script_that_trains_at_import_is_stopped_before_it_fails(
    plain_runs: dict[str, Ran], scripts: dict[str, Path]
) -> None:
    script = scripts["loop_then_fails.py"]
    assert _error_line(plain_runs["loop_then_fails.py"]) == (
        f"gradcheck: error: {script} trains when imported: it asks for gradients at {script}:8; "
        "gradcheck stopped it there, before any weight changed: "
        f"{RUN_INSTEAD} `gradcheck run {script}`"
    )


def test_tensorflow_s_gradient_error_at_import_names_gradcheck_run(
    plain_runs: dict[str, Ran], scripts: dict[str, Path]
) -> None:
    script = scripts["tf1_minimize.py"]
    line = _error_line(plain_runs["tf1_minimize.py"])
    assert line.startswith(
        f"gradcheck: error: {script} raised ValueError at {script}:6 while gradcheck imported "
        "it: No gradients provided for any variable"
    )
    assert line.endswith(
        ". TensorFlow found no gradient for any variable; to see why, "
        f"{RUN_INSTEAD} `gradcheck run {script}`"
    )
    code, out, err = invoke(run_command, [scripts["tf1_minimize.py"], "-q"])
    assert code == ExitCode.DEAD_VARIABLES, err
    assert "1 of 1 trainable variables is dead" in out


def test_an_eager_loss_named_with_loss_points_at_gradcheck_run(
    plain_runs: dict[str, Ran], scripts: dict[str, Path]
) -> None:
    script = scripts["eager_loss.py"]
    assert _error_line(plain_runs["eager_loss.py"]) == (
        f"gradcheck: error: loss in {script} is an eager value, not a loss function: gradients "
        "cannot be traced from a computed number; pass the function that computes it, or "
        f"{RUN_INSTEAD} `gradcheck run {script}`"
    )


def test_loss_model_on_an_uncompiled_model_says_how_to_give_it_a_loss(
    plain_runs: dict[str, Ran], scripts: dict[str, Path]
) -> None:
    script = scripts["compiled_in_main.py"]
    line = _error_line(plain_runs["compiled_in_main.py"])
    assert line == (
        f"gradcheck: error: model in {script} is not compiled with a loss, so it has no "
        "objective to check: compile it with one where the script builds it "
        "(model.compile(optimizer, loss=...)), or name a loss function of the script with "
        f"--loss NAME; or {RUN_INSTEAD} `gradcheck run {script}`"
    )
    assert "Keras loss" not in line


def test_the_run_it_names_checks_the_model_compiled_under_main(scripts: dict[str, Path]) -> None:
    code, out, err = invoke(run_command, [scripts["compiled_in_main.py"], "-q"])
    assert code == ExitCode.CLEAN, err
    assert out.rstrip().endswith(
        ": model.fit: every trainable variable gets gradient (2 ok, 0 blocked, 0 unused, 0 frozen)"
    )


def test_loss_model_on_an_unbuilt_model_names_gradcheck_run(
    plain_runs: dict[str, Ran], scripts: dict[str, Path]
) -> None:
    script = scripts["unbuilt_model.py"]
    assert _error_line(plain_runs["unbuilt_model.py"]) == (
        "gradcheck: error: model has no known input shape: build it (call it once on a batch, "
        "or give it a keras.Input) so gradcheck can trace its loss; or "
        f"{RUN_INSTEAD} `gradcheck run {script}`"
    )


def test_loss_model_on_a_compiled_keras_file_says_to_leave_loss_out(tmp_path: Path) -> None:
    saved = tmp_path / "classifier.keras"
    forked_python.run(
        [
            "-c",
            "import sys, keras\n"
            "inputs = keras.Input((4,))\n"
            "model = keras.Model(inputs, keras.layers.Dense(1)(inputs))\n"
            "model.compile(optimizer='sgd', loss='mse')\n"
            "model.save(sys.argv[1])\n",
            str(saved),
        ]
    )
    line = _error_line(invoke(command, [saved, "--loss", "model"]))
    assert line == (
        "gradcheck: error: 'model' is not a Keras loss; name one such as 'mse' or "
        "'sparse_categorical_crossentropy'; classifier.keras is compiled, so leave --loss out "
        "to check its own loss"
    )
    code, _, err = invoke(command, [saved])
    assert code == ExitCode.CLEAN, err
