"""The plain form stops a script that trains when imported at its first gradient step, before
any weight changes, and names `gradcheck run`; a script that only builds and evaluates its model
at import is checked as before."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradcheck_cli.cli import command
from gradcheck_cli.run import ExitCode
from tests import forked_python
from tests.cli_runs import Ran, invoke

RUN_INSTEAD = "check the script as it trains, stopped at its first gradient request, with"

SCRIPTS = {
    # A tape loop whose own `except Exception` would swallow an ordinary error.
    "tape_loop.py": """
        from pathlib import Path
        import tensorflow as tf

        w = tf.Variable(1.0, name="w")
        optimizer = tf.keras.optimizers.SGD(0.1)
        for step in range(3):
            try:
                with tf.GradientTape() as tape:
                    loss = (w - 3.0) ** 2
                gradients = tape.gradient(loss, [w])
            except Exception:
                continue
            optimizer.apply_gradients(zip(gradients, [w]))
            Path(__file__).with_suffix(".trained").write_text(str(float(w.numpy())))
    """,
    # Keras's fit, whose gradient request is made while its train function is traced.
    "keras_fit.py": """
        from pathlib import Path
        import numpy as np
        import keras

        marker = Path(__file__).with_suffix(".trained")
        inputs = keras.Input((4,))
        model = keras.Model(inputs, keras.layers.Dense(1, name="head")(inputs))
        model.compile(optimizer="sgd", loss="mse")
        stepped = keras.callbacks.LambdaCallback(on_train_batch_end=lambda *_: marker.touch())
        model.fit(np.ones((8, 4)), np.ones((8, 1)), epochs=2, verbose=0, callbacks=[stepped])
        marker.touch()
    """,
    # TF1: `minimize` builds the step; running the initializer and the loss trains nothing,
    # running the step does.
    "tf1_session.py": """
        from pathlib import Path
        import numpy as np
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.ones([2, 1]), name="w")
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2, name="loss")
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        session = tf.Session()
        session.run(tf.global_variables_initializer())
        first = session.run(loss, {x: np.ones((3, 2))})
        session.run(train_op, {x: np.ones((3, 2))})
        Path(__file__).with_suffix(".trained").write_text(str(session.run(w)))
    """,
    # The same graph, trained only under __main__: a plain check imports and checks it.
    "tf1_trains_in_main.py": """
        import numpy as np
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.ones([2, 1]), name="w")
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2, name="loss")
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        session = tf.Session()
        session.run(tf.global_variables_initializer())
        first = session.run(loss, {x: np.ones((3, 2))})

        if __name__ == "__main__":
            session.run(train_op, {x: np.ones((3, 2))})
    """,
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("trains")
    written = {}
    for name, source in SCRIPTS.items():
        written[name] = folder / name
        written[name].write_text(textwrap.dedent(source).lstrip())
    return written


@pytest.fixture(scope="module")
def plain_runs(scripts: dict[str, Path]) -> dict[str, Ran]:
    """`gradcheck SCRIPT` on each script, once: the tape loop as a `gradcheck` process of its
    own, the others in this process (each script still runs in a worker process)."""
    ran = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", scripts["tape_loop.py"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    runs = {"tape_loop.py": Ran(ran.returncode, ran.stdout, ran.stderr)}
    for name in ("keras_fit.py", "tf1_session.py", "tf1_trains_in_main.py"):
        runs[name] = invoke(command, [scripts[name], "-q"], env={"NO_COLOR": "1"})
    return runs


def _error_line(ran: Ran) -> str:
    """The one line gradcheck wrote: exit 2, nothing on stdout, nothing else on stderr."""
    assert (ran.returncode, ran.stdout) == (ExitCode.ERROR, ""), ran.stderr
    (line,) = [line for line in ran.stderr.splitlines() if line.startswith("gradcheck:")]
    return line


def _stopped(script: Path, what: str) -> str:
    return (
        f"gradcheck: error: {script} trains when imported: {what}; gradcheck stopped it there, "
        f"before any weight changed: {RUN_INSTEAD} `gradcheck run {script}`"
    )


# Where each script is stopped: a tape loop at its first gradient request, Keras's fit while its
# step is traced, a TF1 session at the run of its training step (lines of SCRIPTS' sources). Each
# writes its `.trained` marker once a weight has changed.
STOPS = {
    "tape_loop.py": "it asks for gradients at {script}:10",
    "keras_fit.py": "it asks for gradients at {script}:10",
    "tf1_session.py": "at {script}:13 it runs the gradients it asks for at {script}:9",
}


@pytest.mark.parametrize("name", STOPS)
def test_a_script_that_trains_at_import_stops_before_any_weight_changes(
    plain_runs: dict[str, Ran], scripts: dict[str, Path], name: str
) -> None:
    script = scripts[name]
    expected = _stopped(script, STOPS[name].format(script=script))
    assert _error_line(plain_runs[name]) == expected
    assert not script.with_suffix(".trained").exists()


def test_a_tf1_session_that_trains_only_under_main_is_checked(
    plain_runs: dict[str, Ran], scripts: dict[str, Path]
) -> None:
    code, out, err = plain_runs["tf1_trains_in_main.py"]
    assert code == ExitCode.CLEAN, err
    assert out.rstrip().endswith(
        "every trainable variable gets gradient (1 ok, 0 blocked, 0 unused, 0 frozen)"
    )


HOOKS_RESTORED = """
import sys
from pathlib import Path
import tensorflow as tf
from tensorflow.python.client import session
from tensorflow.python.ops import gradients_util
from gradcheck_cli.tracing.script_loading import TrainsAtImport, stopping_gradient_steps

def hooked():
    return (
        tf.GradientTape.gradient,
        gradients_util._GradientsHelper,
        session.BaseSession.run,
        session.BaseSession._make_callable_from_options,
    )

before = hooked()
w = tf.Variable(1.0)
try:
    with stopping_gradient_steps(Path(sys.argv[1])):
        with tf.GradientTape() as tape:
            loss = w * w
        tape.gradient(loss, [w])
except TrainsAtImport:
    pass
else:
    sys.exit("the gradient request went through")
sys.exit(0 if hooked() == before else "a hook stayed in place")
"""


def test_the_stop_leaves_no_hook_in_place(tmp_path: Path) -> None:
    forked_python.run(["-c", HOOKS_RESTORED, str(tmp_path / "train.py")])
