"""The worker's entry point: a bug in gradcheck is one line, with the traceback under --debug."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.options import CheckOptions
from gradcheck_cli.worker.process import run_worker
from gradcheck_cli.worker.protocol import Job, WorkerRequest


@pytest.mark.parametrize("debug", [False, True])
def test_an_internal_error_prints_its_traceback_only_when_debugging(
    debug: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Verifying a SavedModel needs the loss already resolved: without one the worker fails.
    request = WorkerRequest(Job.VERIFY_SAVED_MODEL, tmp_path, CheckOptions(debug=debug))
    with pytest.raises(GradcheckError, match="^internal error while tracing: AssertionError"):
        run_worker(request)
    assert ("Traceback" in capsys.readouterr().err) is debug
