"""The worker protocol: every request and result crosses the process boundary as a pickle."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from gradcheck_cli.graph.model import CustomGradient, SourceLocation, TensorFlowVerdict, Variable
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.worker.protocol import (
    EagerResult,
    Job,
    TensorFlowGradients,
    TracedFunction,
    TracedGraph,
    TracedVariable,
    WorkerFailure,
    WorkerRequest,
    WorkerResult,
)

AT = SourceLocation("model.py", 3, "loss")
KERNEL = Variable("kernel", True, "float32", (2, 2), source=None, path="model.kernel", location=AT)
VERDICTS = {"kernel": TensorFlowVerdict.ZERO}


def _function() -> TracedFunction:
    return TracedFunction(
        loss_name="loss",
        variables=[TracedVariable(KERNEL, arg_index=0)],
        library=b"library",
        op_defs=b"ops",
        loss_shape=(),
        locations={"MatMul@f": AT},
        custom_gradients={"CustomGradient-1": (CustomGradient.NONE, CustomGradient.FLOWS)},
        tensorflow=TensorFlowGradients("tf.GradientTape", VERDICTS),
        top_function="f",
        loss_output=1,
    )


RESULTS: list[WorkerResult] = [
    _function(),
    TracedFunction(**{**vars(_function()), "data_only": _function()}),
    TracedGraph(
        loss_name="loss",
        variables=[TracedVariable(KERNEL, node="kernel")],
        library=b"",
        op_defs=b"ops",
        loss_shape=None,
        graph_def=b"graph",
        loss_tensor="loss:0",
    ),
    EagerResult("loss", [KERNEL], VERDICTS, AT, "numpy() is not available on a symbolic tensor"),
    TensorFlowGradients("tf.saved_model.load + tf.GradientTape", error="ValueError: no"),
    WorkerFailure("model.py raised ZeroDivisionError while gradcheck imported it: division"),
]


@pytest.mark.parametrize("result", RESULTS, ids=lambda result: type(result).__name__)
def test_every_result_survives_pickling(result: WorkerResult) -> None:
    assert pickle.loads(pickle.dumps(result)) == result


def test_the_request_carries_the_options_across() -> None:
    options = CheckOptions(loss="model.loss", verify=True, timeout=5.0, debug=True)
    request = WorkerRequest(Job.SCRIPT, Path("/models/model.py"), options)
    assert pickle.loads(pickle.dumps(request)) == request


def test_only_a_gradient_means_alive_to_tensorflow() -> None:
    assert [v for v in TensorFlowVerdict if not v.dead] == [TensorFlowVerdict.GRADIENT]
