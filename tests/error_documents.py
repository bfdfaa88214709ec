"""What `--format json` writes for a model that could not be checked: its error object."""

from __future__ import annotations

import json
from pathlib import Path

from gradcheck_cli.errors import ECHO_LIMIT

# What an error line always keeps of a value it shortens (`errors.capped`): its start and its end.
_KEPT = ECHO_LIMIT // 2 - 10


def assert_error_document(stdout: str, stderr: str, model: str | None = None) -> None:
    """`stdout` is the `gradcheck/1` error object of `model`, its error the one on `stderr`."""
    document = json.loads(stdout)
    assert isinstance(document, dict), stdout
    assert set(document) == {"schema", "source", "error"}, stdout
    assert document["schema"] == "gradcheck/1"
    if model is not None:
        assert document["source"]["path"] == model
    assert f"gradcheck: error: {document['error']}" in stderr


def shows_path(text: str, path: Path | str) -> bool:
    """Whether the error `text` names `path`: whole, or shortened as every error line shortens
    a long value (a deep temporary folder), its start and end kept around an ellipsis."""
    path = str(path)
    if path in text:
        return True
    return len(path) > ECHO_LIMIT - 20 and path[:_KEPT] in text and path[-_KEPT:] in text
