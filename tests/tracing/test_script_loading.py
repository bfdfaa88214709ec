"""A script run in the worker comes back as the result its loss calls for: a traced function, a
TF1 graph, or the eager tape's verdicts; TensorFlow's own gradients come along with --verify."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.graph.model import TensorFlowVerdict
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.tracing.tf_verification import TAPE, TF1_SESSION
from gradcheck_cli.worker.process import run_worker
from gradcheck_cli.worker.protocol import (
    EagerResult,
    Job,
    TracedFunction,
    TracedGraph,
    WorkerRequest,
    WorkerResult,
)

ROOT = Path(__file__).parents[2]
CASES = {
    "tf2": ROOT / "tests" / "scripts" / "argmax_loss.py",
    "tf1": ROOT / "sample_models" / "faulty_weights_tf1.py",
    "eager": ROOT / "tests" / "scripts" / "eager_numpy_loss.py",
}


@pytest.fixture(scope="module")
def results() -> dict[str, WorkerResult]:
    options = CheckOptions(loss="loss", verify=True)
    # One at a time: after the first, each worker forks from the warm launcher.
    return {
        case: run_worker(WorkerRequest(Job.SCRIPT, path, options)) for case, path in CASES.items()
    }


def test_a_tf2_loss_function_is_traced(results: dict[str, WorkerResult]) -> None:
    result = results["tf2"]
    assert isinstance(result, TracedFunction) and result.loss_name == "loss"
    assert result.variables and all(r.arg_index is not None for r in result.variables)
    assert result.tensorflow is not None and result.tensorflow.method == TAPE
    names = {r.variable.name for r in result.variables if r.variable.trainable}
    assert set(result.tensorflow.verdicts or {}) == names


def test_a_tf1_tensor_brings_its_graph(results: dict[str, WorkerResult]) -> None:
    result = results["tf1"]
    assert isinstance(result, TracedGraph) and result.loss_tensor == "loss:0"
    assert result.graph_def and all(r.node for r in result.variables)
    assert result.tensorflow is not None and result.tensorflow.method == TF1_SESSION
    verdicts = result.tensorflow.verdicts or {}
    assert verdicts["hidden1/weights_i"].dead


def test_a_loss_that_leaves_tensorflow_is_judged_eagerly(results: dict[str, WorkerResult]) -> None:
    result = results["eager"]
    assert isinstance(result, EagerResult)
    assert result.gradients == {
        "weights": TensorFlowVerdict.NONE,
        "bias": TensorFlowVerdict.GRADIENT,
        "spare": TensorFlowVerdict.UNREAD,
    }
    assert result.tensorflow is not None and result.tensorflow.verdicts == result.gradients
