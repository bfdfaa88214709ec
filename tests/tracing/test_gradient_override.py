"""`gradient_override_map` in a graph of its own: gradcheck honours it as `tf.gradients` does.

TensorFlow is the judge: tests/scripts/override_quantizers.py builds DoReFa-style quantizers in a
non-default graph, one with the straight-through override (`{"Round": "Identity"}`), two with a
map keyed by the wrong op type, and a gradient reversal registered by the script itself. The
variables gradcheck calls dead must be exactly those whose `tf.gradients` gradient is None (or
all zeros), as a script (`gradcheck SCRIPT --loss loss`), while the script trains in its own
Session loop (`gradcheck run`, stopped before the first step), and as a TF1 SavedModel. The two
command-line runs start at once when the module starts; the rest runs in this process, whose
eager mode is the one in which the override's probe used to crash.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "override_quantizers.py"
SUBPROCESS_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
TIMEOUT_SECONDS = 300
NOT_DEAD = frozenset({"ok", "frozen"})
# What TensorFlow says, and what the script's docstring promises.
EXPECTED_DEAD = {"w_lowercase", "w_floor"}


@dataclass
class Runs:
    directory: Path
    plain: subprocess.Popen[str]
    run: subprocess.Popen[str]

    def marker(self) -> Path:
        return self.directory / "override_quantizers.marker"


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """gradcheck with JSON output, in the background (the module's two runs overlap)."""
    command = [sys.executable, "-m", "gradcheck_cli", *argv, "-f", "json"]
    pipe = subprocess.PIPE
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=pipe, stderr=pipe, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    directory = tmp_path_factory.mktemp("gradient_override")
    marker = {"GRADCHECK_TEST_MARKER": str(directory / "override_quantizers.marker")}
    script = str(SCRIPT.relative_to(ROOT))
    started = Runs(
        directory,
        plain=_start([script, "--loss", "loss"], SUBPROCESS_ENV),
        run=_start(["run", script], {**SUBPROCESS_ENV, **marker}),
    )
    yield started
    for process in (started.plain, started.run):
        if process.poll() is None:
            process.kill()
        process.communicate()


def _reports(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    stdout, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
    try:
        document = json.loads(stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON (exit {process.returncode}):\n{stdout[-2000:]}\n{stderr[-4000:]}")
    return document if isinstance(document, list) else [document]


def _dead(report: dict[str, Any]) -> set[str]:
    return {v["name"] for v in report["variables"] if v["status"] not in NOT_DEAD}


@pytest.fixture(scope="module")
def script() -> dict[str, Any]:
    # Registering the script's gradient twice in one process raises: import it once.
    return runpy.run_path(str(SCRIPT), run_name="gradcheck_override_test")


@pytest.fixture(scope="module")
def tensorflow_dead(script: dict[str, Any]) -> set[str]:
    """The variables whose tf.gradients gradient is None or all zeros on a random batch."""
    import numpy as np
    import tensorflow as tf

    graph, loss = script["graph"], script["loss"]
    with graph.as_default():
        variables = graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
        gradients = tf.compat.v1.gradients(loss, variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(script["initialize"])
            batch = np.random.default_rng(0).standard_normal((8, 6)).astype("float32")
            values = session.run([g for g in gradients if g is not None], {script["images"]: batch})
    values_left = iter(values)
    dead = set()
    for variable, gradient in zip(variables, gradients):
        if gradient is None or not np.any(next(values_left)):
            dead.add(variable.op.name)
    assert dead == EXPECTED_DEAD, "the script no longer shows what its docstring says"
    return dead


def test_script_form_agrees_with_tensorflow(runs: Runs, tensorflow_dead: set[str]) -> None:
    (report,) = _reports(runs.plain)
    assert runs.plain.returncode == 1
    assert _dead(report) == tensorflow_dead
    blocked = {v["name"]: v for v in report["variables"] if v["name"] in tensorflow_dead}
    for variable in blocked.values():
        assert variable["status"] == "blocked"
    assert not [f for f in report["findings"] if f["code"] == "GC001"]


def test_run_mode_agrees_with_tensorflow_before_the_first_step(
    runs: Runs, tensorflow_dead: set[str]
) -> None:
    (report,) = _reports(runs.run)
    assert runs.run.returncode == 1
    assert report["source"]["kind"] == "run"
    assert _dead(report) == tensorflow_dead
    assert not runs.marker().exists(), "the script trained a step under gradcheck run"


def _dead_in_program(program: Any) -> set[str]:
    from gradcheck_cli.analysis.analyse import analyse

    analysis = analyse(program)
    return {v.name for v in analysis.verdicts if v.dead}


def test_the_probe_runs_in_the_scripts_own_graph_from_eager_code(
    script: dict[str, Any], tensorflow_dead: set[str]
) -> None:
    """This process runs eagerly, as a script that never disables it: the probe of the script's
    own registered gradient must stay inside the script's graph, and add no note."""
    from gradcheck_cli.graph.model import CustomGradient
    from gradcheck_cli.protos.traced_program import program_from_traced
    from gradcheck_cli.tracing import traced

    result = traced.traced_graph(script["graph"], script["loss"], "loss")
    assert result.custom_gradients == {"OverrideQuantizersFlip": (CustomGradient.FLOWS,)}
    assert result.notes == []
    assert _dead_in_program(program_from_traced(result)) == tensorflow_dead


def test_a_gradient_that_cannot_run_outside_tf_gradients_is_a_note_not_a_crash() -> None:
    import tensorflow as tf

    from gradcheck_cli.protos.traced_program import program_from_traced
    from gradcheck_cli.tracing import traced

    @tf.RegisterGradient("GradcheckTestRefusesToRun")
    def _refuses(op: Any, grad: Any) -> list[Any]:
        raise RuntimeError("this gradient runs only inside tf.gradients")

    graph = tf.Graph()
    with graph.as_default():
        weight = tf.compat.v1.get_variable("weight", [3])
        with graph.gradient_override_map({"Round": "GradcheckTestRefusesToRun"}):
            rounded = tf.round(weight)
        loss = tf.reduce_sum(rounded, name="loss")
    result = traced.traced_graph(graph, loss, "loss")
    assert "GradcheckTestRefusesToRun" not in result.custom_gradients
    (note,) = result.notes
    assert "GradcheckTestRefusesToRun" in note and "only inside tf.gradients" in note
    program = program_from_traced(result)
    assert note in program.notes
    assert _dead_in_program(program) == set()  # assumed to flow, and said so


def test_savedmodel_form_keeps_the_override_and_agrees_with_tensorflow(
    script: dict[str, Any], tensorflow_dead: set[str], tmp_path: Path
) -> None:
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    from gradcheck_cli.api import check

    export = tmp_path / "override_quantizers"
    with tf.compat.v1.Session(graph=script["graph"]) as session:
        session.run(script["initialize"])
        tf.compat.v1.saved_model.simple_save(
            session,
            str(export),
            inputs={"images": script["images"]},
            outputs={"loss": script["loss"]},
        )
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((export / "saved_model.pb").read_bytes())
    overrides = {
        node.op: node.attr["_gradient_op_type"].s.decode()
        for node in saved.meta_graphs[0].graph_def.node
        if "_gradient_op_type" in node.attr
    }
    # TF1 SavedModels keep the override on the op, so TensorFlow honours it after loading too.
    assert overrides == {"Round": "Identity", "Identity": "OverrideQuantizersFlip"}
    report = check(str(export), "serving_default:loss")
    assert {v.name for v in report.dead} == tensorflow_dead


def test_an_override_name_read_from_protos_is_judged_like_an_op_of_that_type() -> None:
    """A SavedModel keeps the override's name, not its Python: TensorFlow looks the gradient up
    under that name, so its registry entry decides, as for an op of that type."""
    from gradcheck_cli.differentiability.reasons import Reason
    from gradcheck_cli.differentiability.rules import input_cut
    from gradcheck_cli.graph.model import Node, TensorRef

    def cut_of(op_type: str, override: str) -> Reason | None:
        node = Node(
            name="op",
            op_type=op_type,
            inputs=(TensorRef("x"),),
            output_dtypes=("float32",),
            gradient_op_type=override,
        )
        found = input_cut(node, 0, "float32", {})
        return None if found is None else found.reason

    assert cut_of("Round", "Identity") is None
    assert cut_of("Round", "Round") is Reason.NON_DIFFERENTIABLE_OP
    assert cut_of("Identity", "StopGradient") is Reason.STOP_GRADIENT
    # A name TensorFlow does not register is the user's own gradient: assumed to flow.
    assert cut_of("Identity", "OverrideQuantizersFlip") is None
