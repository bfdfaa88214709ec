"""Whether code run in a fresh interpreter imports a module (TensorFlow stays behind one door)."""

from __future__ import annotations

import subprocess
import sys


def imported_after(code: str, module: str = "tensorflow") -> bool:
    """Run `code` in a new Python process and say whether `module` is then in sys.modules."""
    probe = f"import sys\n{code}\nprint({module!r} in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    return result.stdout.strip().splitlines()[-1] == "True"
