"""Run the TensorFlow worker in its own process and bring back its Bundle."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.loaders.bundle import Bundle

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


def run_worker(request: dict[str, Any], timeout: float | None = None) -> Bundle:
    """Everything the worker (and the user's code in it) prints goes to our stderr.

    `timeout` (seconds; default GRADCHECK_TIMEOUT or 600) bounds a script that never returns.
    """
    if timeout is None:
        timeout = float(os.environ.get("GRADCHECK_TIMEOUT", DEFAULT_TIMEOUT))
    with tempfile.TemporaryDirectory(prefix="gradcheck-") as scratch:
        request_path = Path(scratch) / "request.json"
        result_path = Path(scratch) / "result.pickle"
        request_path.write_text(json.dumps(request))
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        env["PYTHONUNBUFFERED"] = "1"
        try:
            completed = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gradcheck_cli.loaders.tf_worker",
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
                f"{request.get('path')} did not finish within {timeout:g} s (an endless loop, or "
                "training that runs at import?); set GRADCHECK_TIMEOUT or --timeout if it needs "
                "longer"
            ) from None
        for stream in (completed.stdout, completed.stderr):
            text = stream.decode(errors="replace")
            if not os.environ.get("GRADCHECK_DEBUG"):
                text = _without_tensorflow_start_up_noise(text)
            if text:
                sys.stderr.write(text)
        if not result_path.is_file():
            code = completed.returncode
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            raise GradcheckError(
                f"{request.get('path')} ended the process while gradcheck loaded it ({how}: "
                "os._exit, a crash or a kill); anything it printed is above"
            )
        with result_path.open("rb") as result:
            bundle: Bundle = pickle.load(result)
    if bundle.error is not None:
        raise GradcheckError(bundle.error)
    return bundle
