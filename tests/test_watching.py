"""`watch()` and `keras_callback()` as users run them: in a real Jupyter kernel and in a script.

TensorFlow is the judge: in the same kernel, or the same script under tests/run_oracle.py, the
variables the report calls dead get a None gradient from tf.GradientTape, and those it does not
get one. The notebook runs in one kernel (one TensorFlow start-up for every cell); its cells
print JSON lines that the test reads back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import forked_python
from tests.cli_runs import invoke

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts" / "watch"
KERNEL_SECONDS = 300
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "NO_COLOR": "1",
}

# What gradcheck installs while it watches: every attribute of these classes, and the import
# hooks, must be the same objects again once it is done.
HOOKS = """
import sys
import keras, tensorflow as tf
from keras.src.backend.tensorflow import trainer
from keras.src.layers import layer
from tensorflow.python.client import session
from tensorflow.python.eager.polymorphic_function import atomic_function
from tensorflow.python.framework import ops
from tensorflow.python.ops import gradients_util, resource_variable_ops
from tensorflow.python.training import optimizer as v1_optimizer

def hooks():
    owners = [tf.GradientTape, atomic_function.AtomicFunction, session.BaseSession,
              v1_optimizer.Optimizer, resource_variable_ops.BaseResourceVariable,
              resource_variable_ops.ResourceVariable, ops._EagerTensorBase, ops.Graph,
              layer.Layer, trainer.TensorFlowTrainer]
    # Python makes a class's empty __annotations__ when it is first read (TensorFlow's fit does).
    state = {f"{o.__name__}.{k}": id(v) for o in owners for k, v in vars(o).items()
             if k != "__annotations__"}
    state["_GradientsHelper"] = id(gradients_util._GradientsHelper)
    state["meta_path"] = [id(finder) for finder in sys.meta_path]
    return state

def none_gradients(loss_of, variables):
    with tf.GradientTape() as tape:
        loss = loss_of()
    grads = tape.gradient(loss, variables)
    return sorted(getattr(v, "path", v.name.split(":")[0]) for v, g in zip(variables, grads)
                  if g is None)

def same(before, variables):
    return [bool((b == v.numpy()).all()) for b, v in zip(before, variables)]
"""

DEAD_MODEL = """
import numpy as np
def dead_model():
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(3, name="used")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1, name="out")(hidden))
    model.spare = keras.layers.Dense(3, name="spare")  # built, never called: dead
    model.spare.build((None, 4))
    model.compile("sgd", "mse")
    return model
x, y = np.ones((8, 4), "float32"), np.ones((8, 1), "float32")
def fit_loss(model):
    return lambda: keras.losses.MeanSquaredError()(y, model(x))
"""

CELLS = [
    # 0: watch() at the top, stop by default
    "import json\n" + HOOKS + "before = hooks()\nimport gradcheck_cli\ngradcheck_cli.watch()\n",
    # 1: a Keras fit with a dead layer: stopped before its first step
    DEAD_MODEL + "model = dead_model()\nstart = [v.numpy() for v in model.weights]\n"
    "model.fit(x, y, epochs=1, verbose=0)\n",
    # 2: what happened
    "print(json.dumps({'cell': 'stopped', 'same': same(start, model.weights),"
    " 'hooks_gone': hooks() == before,"
    " 'none': none_gradients(fit_loss(model), model.trainable_variables)}))\n",
    # 3: a GradientTape step with tf.stop_gradient, in a with block that lets it train on
    "with gradcheck_cli.watch(on_dead='continue') as watching:\n"
    "    w = tf.Variable(tf.ones((3, 1)), name='w_cut')\n"
    "    v = tf.Variable(tf.ones((3, 1)), name='v_trained')\n"
    "    opt = keras.optimizers.SGD(0.1)\n"
    "    def loss_of():\n"
    "        x = tf.ones((2, 3))\n"
    "        return tf.reduce_sum(tf.matmul(x, tf.stop_gradient(w)) + tf.matmul(x, v))\n"
    "    @tf.function\n"
    "    def step():\n"
    "        with tf.GradientTape() as tape:\n"
    "            loss = loss_of()\n"
    "        grads = tape.gradient(loss, [w, v])\n"
    "        opt.apply_gradients([(g, t) for g, t in zip(grads, [w, v]) if g is not None])\n"
    "    step()\n"
    "print(json.dumps({'cell': 'tape', 'checked': watching.checked,"
    " 'same': same([1.0, 1.0], [w, v]),"
    " 'hooks_gone': hooks() == before, 'none': none_gradients(loss_of, [w, v])}))\n",
    # 4: the Keras callback that lets fit go on
    "model = dead_model()\nstart = [v.numpy() for v in model.weights]\n"
    "history = model.fit(x, y, epochs=2, verbose=0,"
    " callbacks=[gradcheck_cli.keras_callback(on_dead='continue')])\n"
    "print(json.dumps({'cell': 'fit-continue', 'epochs': len(history.history['loss']),"
    " 'same': same(start, model.weights), 'hooks_gone': hooks() == before}))\n",
    # 5: the Keras callback that stops fit
    "model = dead_model()\nstart = [v.numpy() for v in model.weights]\n"
    "model.fit(x, y, epochs=2, verbose=0, callbacks=[gradcheck_cli.keras_callback()])\n",
    # 6
    "print(json.dumps({'cell': 'fit-stopped', 'same': same(start, model.weights),"
    " 'hooks_gone': hooks() == before}))\n",
    # 7: nothing dead: one line, and fit trains
    "inputs = keras.Input((4,))\n"
    "clean = keras.Model(inputs, keras.layers.Dense(1, name='only')(inputs))\n"
    "clean.compile('sgd', 'mse')\nstart = [v.numpy() for v in clean.weights]\n"
    "clean.fit(x, y, epochs=1, verbose=0, callbacks=[gradcheck_cli.keras_callback()])\n"
    "print(json.dumps({'cell': 'clean', 'same': same(start, clean.weights),"
    " 'hooks_gone': hooks() == before}))\n",
    # 8: a step gradcheck cannot check (no trainable variable): one line, and it goes on
    "gradcheck_cli.watch()\n"
    "frozen = tf.Variable(1.0, trainable=False)\n"
    "with tf.GradientTape() as tape:\n"
    "    tape.watch(frozen)\n"
    "    loss = frozen * 2.0\n"
    "frozen.assign_add(tape.gradient(loss, [frozen])[0])\n"
    "print(json.dumps({'cell': 'unchecked', 'value': float(frozen),"
    " 'hooks_gone': hooks() == before}))\n",
    # 9: the dead layer allowed: reported as allowed, and fit trains although stop is the default
    "model = dead_model()\nstart = [v.numpy() for v in model.weights]\n"
    "model.fit(x, y, epochs=1, verbose=0,"
    " callbacks=[gradcheck_cli.keras_callback(allow_dead=['spare/*'])])\n"
    "print(json.dumps({'cell': 'allowed', 'same': same(start, model.weights),"
    " 'hooks_gone': hooks() == before}))\n",
    # 10: a block that asks for gradients and changes no weight: checked when it ends
    "with gradcheck_cli.watch():\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = loss_of()\n"
    "    grads = tape.gradient(loss, [w, v])\n",
    # 11: watch() without a block; the step's own code fails on the None gradient, uncaught
    "gradcheck_cli.watch()\n"
    "u = tf.Variable(tf.ones((3, 1)), name='u_cut')\n"
    "with tf.GradientTape() as tape:\n"
    "    loss = tf.reduce_sum(tf.stop_gradient(u) * 2.0)\n"
    "grads = tape.gradient(loss, [u])\n"
    "grads = [g * 0.5 for g in grads]\n",
    # 12
    "print(json.dumps({'cell': 'uncaught', 'hooks_gone': hooks() == before,"
    " 'handlers': list(get_ipython().custom_exceptions),"
    " 'none': none_gradients(lambda: tf.reduce_sum(tf.stop_gradient(u) * 2.0), [u])}))\n",
]


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The notebook, run in one kernel of this interpreter (errors kept as cell outputs)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    folder = tmp_path_factory.mktemp("notebook")
    cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    document = nbformat.v4.new_notebook(cells=cells)
    # jupyter_client starts the kernel spec's `python` as this interpreter (sys.executable).
    client = nbclient.NotebookClient(
        document,
        kernel_name="python3",
        timeout=KERNEL_SECONDS,
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute(env=ENV)  # the kernel's environment (jupyter_client's start_kernel)
    return document


def _outputs(notebook: Any, index: int) -> list[Any]:
    return list(notebook.cells[index].outputs)


def _html(notebook: Any, index: int) -> str:
    """The cell's rich output, HTML, as one string (tags and entities kept)."""
    return "".join(
        output["data"]["text/html"]
        for output in _outputs(notebook, index)
        if output["output_type"] == "display_data" and "text/html" in output["data"]
    )


def _text_of(html: str) -> str:
    import html as html_module

    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


def _printed(notebook: Any, index: int) -> dict[str, Any]:
    lines = [
        line
        for output in _outputs(notebook, index)
        if output["output_type"] == "stream" and output["name"] == "stdout"
        for line in output["text"].splitlines()
        if line.startswith("{")
    ]
    assert lines, _outputs(notebook, index)
    return json.loads(lines[-1])


def _error(notebook: Any, index: int) -> Any:
    errors = [o for o in _outputs(notebook, index) if o["output_type"] == "error"]
    return errors[0] if errors else None


def test_watch_stops_a_keras_fit_in_the_notebook_before_its_first_step(notebook: Any) -> None:
    assert _error(notebook, 0) is None, _outputs(notebook, 0)
    report = _text_of(_html(notebook, 1))
    # The report is the rich HTML output of the cell that trains, naming the dead layer.
    assert "unused layer spare: kernel, bias" in report, report
    assert "2 of 6 trainable variables are dead" in report
    # The cell's own line, its cell named as IPython's tracebacks name it.
    assert "created at Cell In[2]:6" in report
    assert 'model.spare = keras.layers.Dense(3, name="spare")' in report
    assert "ipykernel" not in report
    # The HTML page's body, with the model's map; its style applies inside it only, and its
    # ids are its own (another report in the notebook has others).
    page = _html(notebook, 1)
    assert page.startswith('<div class="gradcheck-report">') and 'class="model-map"' in page
    assert 'data-variable="spare/kernel"' in page
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    selectors = [s.strip() for rule in re.findall(r"([^{}]+)\{", style) for s in rule.split(",")]
    assert selectors and all(s.startswith(".gradcheck-report") for s in selectors), selectors
    ids = set(re.findall(r' id="([^"]+)"', page))
    links = set(re.findall(r'href="#([^"]+)"', page))
    assert ids and links <= ids
    assert not ids & set(re.findall(r' id="([^"]+)"', _html(notebook, 5)))
    error = _error(notebook, 1)
    assert error is not None and error["ename"] == "DeadVariablesError", _outputs(notebook, 1)
    assert "spare/bias, spare/kernel" in error["evalue"]
    # Under the report, IPython shows the error as one line: no traceback through gradcheck.
    assert error["traceback"] == [f"DeadVariablesError: {error['evalue']}"], error["traceback"]
    after = _printed(notebook, 2)
    assert after["same"] == [True] * 6  # no weight changed
    assert after["hooks_gone"]
    # TensorFlow's own verdict: exactly the variables the report calls dead get None.
    assert after["none"] == ["spare/bias", "spare/kernel"]


def test_watch_as_a_context_manager_names_the_cut_and_lets_training_go_on(notebook: Any) -> None:
    assert _error(notebook, 3) is None, _outputs(notebook, 3)
    report = _text_of(_html(notebook, 3))
    assert "blocked w_cut" in report, report
    assert "cut 1 StopGradient (GC101 stop_gradient) at Cell In[4]:7" in report
    assert "tf.stop_gradient(w)" in report
    # The map names the cut's cell as the story does, not the file IPython ran it from.
    assert "✂ StopGradient (GC101) Cell In[4]:7</text>" in _html(notebook, 3)
    assert "gradcheck: training goes on" in report
    after = _printed(notebook, 3)
    assert after["checked"]
    assert after["same"] == [True, False]  # v trained on; w, cut off, never changes
    assert after["hooks_gone"]
    assert after["none"] == ["w_cut"]


def test_the_keras_callback_reports_and_lets_fit_go_on(notebook: Any) -> None:
    assert _error(notebook, 4) is None, _outputs(notebook, 4)
    report = _text_of(_html(notebook, 4))
    assert "unused layer spare: kernel, bias" in report, report
    assert "gradcheck: fit goes on" in report
    after = _printed(notebook, 4)
    assert after["epochs"] == 2
    # The layers in the loss trained; the dead one did not.
    assert after["same"] == [False, False, False, False, True, True]
    assert after["hooks_gone"]


def test_the_keras_callback_stops_fit_before_its_first_step(notebook: Any) -> None:
    assert "unused layer spare: kernel, bias" in _text_of(_html(notebook, 5))
    error = _error(notebook, 5)
    assert error is not None and error["ename"] == "DeadVariablesError", _outputs(notebook, 5)
    after = _printed(notebook, 6)
    assert after["same"] == [True] * 6
    assert after["hooks_gone"]


def test_nothing_dead_is_one_line_and_fit_trains(notebook: Any) -> None:
    assert _error(notebook, 7) is None, _outputs(notebook, 7)
    note = _text_of(_html(notebook, 7)).strip()
    assert note == (
        "gradcheck: no dead variables (2 ok, 0 blocked, 0 unused, 0 frozen); fit goes on"
    ), note
    assert "\n" not in note
    after = _printed(notebook, 7)
    assert after["same"] == [False, False]
    assert after["hooks_gone"]


# -- in a plain script: `python script.py` -------------------------------------------------------

SCRIPT = SCRIPTS / "keras_fit_dead.py"


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The script run plainly with watch() stopping (its stop caught, then raised on; and not
    caught at all, as users write it) and continuing (three processes at once), under
    `gradcheck run`, and under TensorFlow's oracle."""
    folder = tmp_path_factory.mktemp("script")
    started = {}
    for mode in ("stop", "continue", "uncaught"):
        out = {} if mode == "uncaught" else {"GRADCHECK_TEST_OUT": str(folder / mode)}
        watching = "stop" if mode == "uncaught" else mode
        env = {**ENV, "GRADCHECK_TEST_WATCH": watching, **out}
        started[mode] = subprocess.Popen(
            [sys.executable, str(SCRIPT)],
            env=env,
            cwd=ROOT,  # where `gradcheck run` runs too: reports name paths relative to it
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    runs: dict[str, Any] = {"gradcheck run": invoke_run(SCRIPT)}
    oracle_out = folder / "oracle.json"
    argv = ["-m", "tests.run_oracle", str(oracle_out), str(SCRIPT)]
    forked_python.run(argv, {**ENV, "GRADCHECK_TEST_WATCH": ""}, ROOT, KERNEL_SECONDS)
    runs["oracle"] = json.loads(oracle_out.read_text())
    for mode, process in started.items():
        stdout, stderr = process.communicate(timeout=KERNEL_SECONDS)
        out = folder / mode
        facts = json.loads(out.read_text()) if out.exists() else None
        runs[mode] = (process.returncode, stdout, stderr, facts)
    return runs


def invoke_run(script: Path) -> list[dict[str, Any]]:
    """`gradcheck run SCRIPT -f json`'s reports, one per gradient request."""
    from gradcheck_cli.cli import run_command

    # The script's own watch() leaves the check to `gradcheck run`: one report, no exception.
    env = {"GRADCHECK_TEST_WATCH": "stop"}
    code, stdout, stderr = invoke(run_command, [str(script), "-f", "json"], env=env)
    assert code == 1, stderr
    assert "DeadVariablesError" not in stderr and "unused layer" not in stderr
    document = json.loads(stdout)
    return document if isinstance(document, list) else [document]


def test_watch_in_a_script_stops_with_gradcheck_runs_findings(script_runs: dict[str, Any]) -> None:
    code, stdout, stderr, facts = script_runs["stop"]
    assert code == 1, stderr
    assert "trained" not in stdout
    assert "unused layer spare: kernel, bias" in stderr  # the terminal report, on stderr
    assert "2 of 6 trainable variables are dead" in stderr
    assert "DeadVariablesError: gradcheck stopped training before its first weight change" in (
        stderr
    )
    assert "Traceback" not in stderr and "gradcheck_cli" not in stderr
    assert facts["same"] == [True] * 6
    # The same reports as `gradcheck run` gives for the same script.
    assert facts["reports"] == script_runs["gradcheck run"]
    dead = sorted(
        variable["name"]
        for report in facts["reports"]
        for variable in report["variables"]
        if variable["status"] not in ("ok", "frozen")
    )
    (request,) = script_runs["oracle"]["requests"]
    assert sorted(request["none"]) == dead == ["spare/bias", "spare/kernel"]


def test_a_script_stopped_uncaught_ends_with_the_report_one_line_and_exit_1(
    script_runs: dict[str, Any],
) -> None:
    code, stdout, stderr, _ = script_runs["uncaught"]
    assert code == 1, stderr
    assert "trained" not in stdout
    report, _, last = stderr.rstrip("\n").rpartition("\n")
    assert "unused layer spare: kernel, bias" in report, stderr
    assert "2 of 6 trainable variables are dead" in report
    # After the report, one line: no traceback through gradcheck's hooks, no frame of its code.
    assert last.startswith(
        "DeadVariablesError: gradcheck stopped training before its first weight change: "
        "2 dead variables (spare/bias, spare/kernel)"
    ), stderr
    assert "Traceback" not in stderr + stdout
    assert "gradcheck_cli" not in stderr + stdout


def test_watch_in_a_script_can_let_training_go_on(script_runs: dict[str, Any]) -> None:
    code, stdout, stderr, facts = script_runs["continue"]
    assert code == 0, stderr
    assert "trained" in stdout
    assert "unused layer spare: kernel, bias" in stderr
    assert "gradcheck: training goes on" in stderr
    assert "Traceback" not in stderr
    assert facts["same"] == [False, False, False, False, True, True]


def test_a_step_gradcheck_cannot_check_is_one_line_and_goes_on(notebook: Any) -> None:
    assert _error(notebook, 8) is None, _outputs(notebook, 8)
    note = _text_of(_html(notebook, 8)).strip()
    assert note.startswith("gradcheck: cannot check this step: the loss"), note
    assert note.endswith(
        "has no trainable variable to check: the model has none, or the loss is "
        "computed from constants and inputs only; training goes on unchecked"
    )
    after = _printed(notebook, 8)
    assert after == {"cell": "unchecked", "value": 3.0, "hooks_gone": True}


def test_an_allowed_dead_variable_does_not_stop_fit(notebook: Any) -> None:
    assert _error(notebook, 9) is None, _outputs(notebook, 9)
    report = _text_of(_html(notebook, 9))
    assert "spare/bias is dead, but allowed by allow-dead pattern 'spare/*'" in report, report
    assert "gradcheck: fit goes on" in report
    after = _printed(notebook, 9)
    assert after["same"] == [False, False, False, False, True, True]
    assert after["hooks_gone"]


def test_a_block_that_changes_no_weight_is_checked_when_it_ends(notebook: Any) -> None:
    report = _text_of(_html(notebook, 10))
    assert "blocked w_cut" in report, report
    assert "cut 1 StopGradient (GC101 stop_gradient) at Cell In[4]:7" in report
    error = _error(notebook, 10)
    assert error is not None and error["ename"] == "DeadVariablesError", _outputs(notebook, 10)


# -- a step that fails after asking for gradients: the report, then its own error ----------------


def test_a_cell_that_fails_uncaught_after_asking_for_gradients_shows_the_report_first(
    notebook: Any,
) -> None:
    # watch() was called without a `with` block: the cell's error reaches IPython uncaught.
    outputs = _outputs(notebook, 11)
    kinds = [output["output_type"] for output in outputs]
    assert "display_data" in kinds and "error" in kinds, outputs
    assert kinds.index("display_data") < kinds.index("error")  # the report, then the error
    report = _text_of(_html(notebook, 11))
    assert "gradcheck: training raised TypeError after it asked for gradients" in report
    assert "blocked u_cut" in report
    assert "StopGradient (GC101 stop_gradient) at Cell In[12]:4" in report
    assert "--fix" not in report  # no command to offer in a notebook
    error = _error(notebook, 11)
    assert error["ename"] == "TypeError" and "NoneType" in error["evalue"], error
    after = _printed(notebook, 12)
    # TensorFlow's word: u gets None; IPython's handlers and every hook are as they were.
    assert after["none"] == ["u_cut"]
    assert after["handlers"] == [] and after["hooks_gone"]


def test_a_step_keras_aborts_is_reported_before_its_error(tmp_path: Path) -> None:
    """Keras 3: every variable's gradient is None, so Keras's optimizer refuses the step (the
    callback and watch(), built-in and custom train_step, an eager apply_gradients), or the
    step's own code fails on a None (traced, and in a `with watch()` block). gradcheck's report
    comes first, and the program gets the error it gets without gradcheck."""
    from tests.aborted_steps import assert_reported_before_the_error, run_aborted_steps

    assert_reported_before_the_error(run_aborted_steps("3", tmp_path))


HOOKS_OUTLIVING_FIT = """
import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.eager.polymorphic_function import atomic_function, polymorphic_function
from tensorflow.python.ops import resource_variable_ops

import gradcheck_cli

PATCHED = (
    tf.GradientTape, resource_variable_ops.BaseResourceVariable,
    resource_variable_ops.ResourceVariable, keras.layers.Layer, keras.Model,
    atomic_function.AtomicFunction, polymorphic_function.Function, tf.Variable,
)


def snapshot():
    return {(c.__qualname__, k): v for c in PATCHED for k, v in vars(c).items()}


class Fails(keras.callbacks.Callback):
    def __init__(self, where):
        super().__init__()
        self.where = where

    def on_train_begin(self, logs=None):
        if self.where == "train_begin":
            raise RuntimeError("stopped by a callback")

    def on_train_batch_begin(self, batch, logs=None):
        if self.where == "batch_begin":
            raise KeyboardInterrupt


before = snapshot()
for where in ("train_begin", "batch_begin"):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    try:
        callbacks = [gradcheck_cli.keras_callback(), Fails(where)]
        model.fit(np.ones((4, 3)), np.ones((4, 1)), callbacks=callbacks, verbose=0)
    except (RuntimeError, KeyboardInterrupt) as error:
        print("fit ended:", type(error).__name__)
    after = snapshot()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) is not after.get(k))
    print("patched after", where, changed)
# The program trains on with a plain loop whose variable is dead: unwatched, it just runs.
dead = tf.Variable(1.0)
with tf.GradientTape() as tape:
    loss = tf.stop_gradient(dead) * 2.0
print("gradient", tape.gradient(loss, [dead]))
"""


def test_the_keras_callback_s_hooks_go_when_fit_ends_with_an_error(tmp_path: Path) -> None:
    script = tmp_path / "hooks.py"
    script.write_text(HOOKS_OUTLIVING_FIT)
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines.count("fit ended: RuntimeError") == 1, ran.stdout
    assert lines.count("fit ended: KeyboardInterrupt") == 1, ran.stdout
    assert "patched after train_begin []" in lines, ran.stdout
    assert "patched after batch_begin []" in lines, ran.stdout
    assert "gradient [None]" in lines, ran.stdout  # no DeadVariablesError raised into it
