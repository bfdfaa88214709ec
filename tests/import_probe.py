"""Whether code run in a fresh interpreter imports a module (TensorFlow stays behind one door)."""

from __future__ import annotations

import json
import subprocess
import sys


def modules_after(code: str) -> set[str]:
    """Run `code` in a new Python process: the names in its sys.modules once `code` is done."""
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def imported_after(code: str, module: str = "tensorflow") -> bool:
    """Run `code` in a new Python process and say whether `module` is then in sys.modules."""
    return module in modules_after(code)
