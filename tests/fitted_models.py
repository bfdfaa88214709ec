"""A script that fits its model at import, checked in the script's own process after that fit:
`gradcheck_cli.check(model)` on the live model, the form that traces a model from the batch `fit`
saw. (A plain check stops such a script at its first gradient step, before any weight changes.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests import forked_python

_CHECK_AFTER_FIT = """
import json, runpy, sys
import gradcheck_cli

namespace = runpy.run_path(sys.argv[1], run_name="__main__")
report = gradcheck_cli.check(namespace["model"])
with open(sys.argv[2], "w") as out:
    json.dump({
        "variables": [v.name for v in report.variables],
        "dead": sorted(v.name for v in report.variables if v.dead),
    }, out)
"""


def checked_after_fit(script: Path, out: Path) -> dict[str, Any]:
    """The names of the model's variables, and of its dead ones, as the API reports them once
    the script ran (and fitted) as `__main__`."""
    forked_python.run(["-c", _CHECK_AFTER_FIT, str(script), str(out)], None, timeout=300)
    return json.loads(out.read_text())
