"""Run the TensorFlow worker in its own process and bring back its result."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.loaders.worker_protocol import (
    EagerResult,
    TensorFlowGradients,
    TracedFunction,
    TracedGraph,
    WorkerFailure,
    WorkerRequest,
)

# TensorFlow's C++ start-up lines (no GPU found, CPU features, oneDNN) say nothing about the
# user's model; the user's own prints and TensorFlow's Python warnings are kept.
_START_UP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} [\d:.]+\s+\d+ (cuda_\w+|cudart_stub|cpu_feature_guard|port)\.cc:\d+\].*"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler"
    r" flags\.)$"
)


def _without_tensorflow_start_up_noise(text: str) -> str:
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if not _START_UP_NOISE.match(line.rstrip("\n"))
    )


DEFAULT_TIMEOUT = 600.0


def run_worker(
    request: WorkerRequest,
) -> TracedFunction | TracedGraph | EagerResult | TensorFlowGradients:
    """Everything the worker (and the user's code in it) prints goes to our stderr.

    `request.options.timeout` (seconds; default GRADCHECK_TIMEOUT or 600) bounds a script that
    never returns; a WorkerFailure comes back as a GradcheckError.
    """
    options = request.options
    timeout = options.timeout
    if timeout is None:
        timeout = float(os.environ.get("GRADCHECK_TIMEOUT", DEFAULT_TIMEOUT))
    with tempfile.TemporaryDirectory(prefix="gradcheck-") as scratch:
        request_path = Path(scratch) / "request.pickle"
        result_path = Path(scratch) / "result.pickle"
        with request_path.open("wb") as request_file:
            pickle.dump(request, request_file)
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        env["PYTHONUNBUFFERED"] = "1"
        try:
            completed = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gradcheck_cli.loaders.worker_entry",
                    str(request_path),
                    str(result_path),
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=env,
                check=False,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise GradcheckError(
                f"{request.path} did not finish within {timeout:g} s (an endless loop, or "
                "training that runs at import?); set GRADCHECK_TIMEOUT or --timeout if it needs "
                "longer"
            ) from None
        for stream in (completed.stdout, completed.stderr):
            text = stream.decode(errors="replace")
            if not options.debug:
                text = _without_tensorflow_start_up_noise(text)
            if text:
                sys.stderr.write(text)
        if not result_path.is_file():
            code = completed.returncode
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            raise GradcheckError(
                f"{request.path} ended the process while gradcheck loaded it ({how}: "
                "os._exit, a crash or a kill); anything it printed is above"
            )
        with result_path.open("rb") as result_file:
            result = pickle.load(result_file)
    if isinstance(result, WorkerFailure):
        raise GradcheckError(result.message)
    return result
