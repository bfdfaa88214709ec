"""TensorFlow stays behind one door: the CLI's help, reporters and library import stay light."""

from __future__ import annotations

import subprocess
import sys


def _tensorflow_imported_after(code: str) -> bool:
    probe = f"import sys\n{code}\nprint('tensorflow' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    return result.stdout.strip().splitlines()[-1] == "True"


def test_package_cli_and_reporters_do_not_import_tensorflow() -> None:
    assert not _tensorflow_imported_after(
        "import gradcheck_cli, gradcheck_cli.cli, gradcheck_cli.reporters.terminal, "
        "gradcheck_cli.reporters.json_reporter, gradcheck_cli.findings.build, "
        "gradcheck_cli.analysis.analyse"
    )


def test_help_does_not_import_tensorflow() -> None:
    assert not _tensorflow_imported_after(
        "from click.testing import CliRunner\n"
        "from gradcheck_cli.cli import command\n"
        "assert CliRunner().invoke(command, ['--help']).exit_code == 0"
    )


def test_the_probe_can_see_tensorflow() -> None:
    assert _tensorflow_imported_after("import tensorflow")
