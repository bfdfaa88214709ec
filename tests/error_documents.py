"""What `--format json` writes for a model that could not be checked: its error object."""

from __future__ import annotations

import json


def assert_error_document(stdout: str, stderr: str, model: str | None = None) -> None:
    """`stdout` is the `gradcheck/1` error object of `model`, its error the one on `stderr`."""
    document = json.loads(stdout)
    assert isinstance(document, dict), stdout
    assert set(document) == {"schema", "source", "error"}, stdout
    assert document["schema"] == "gradcheck/1"
    if model is not None:
        assert document["source"]["path"] == model
    assert f"gradcheck: error: {document['error']}" in stderr
