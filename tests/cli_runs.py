"""Run gradcheck's command line inside the test process.

A `gradcheck` subprocess pays TensorFlow's import for its first worker; in the test process,
workers after the first fork from one warm launcher. Tests about the process itself (signals,
process trees, stdout at the file-descriptor level) still run `python -m gradcheck_cli`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import click
from click.testing import CliRunner, Result


def cli_result(
    command: click.Command, args: Sequence[str | os.PathLike[str]], **kwargs: Any
) -> Result:
    """click's result of `command args` (`kwargs`: CliRunner.invoke's, e.g. `env`). An exception
    gradcheck did not turn into an exit code is raised, never read as exit code 1."""
    result = CliRunner().invoke(command, [os.fspath(a) for a in args], **kwargs)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


class Ran(NamedTuple):
    """What a run gave, named like subprocess.CompletedProcess's fields; unpacks as
    (exit code, stdout, stderr)."""

    returncode: int
    stdout: str
    stderr: str


def invoke(command: click.Command, args: Sequence[str | os.PathLike[str]], **kwargs: Any) -> Ran:
    """`command args` as `cli_result` runs it: its exit code, stdout and stderr."""
    result = cli_result(command, args, **kwargs)
    return Ran(result.exit_code, result.stdout, result.stderr)


def gradcheck_json(*args: str) -> Ran:
    """`gradcheck ARGS --format json` in this process."""
    from gradcheck_cli.cli import command

    return invoke(command, [*args, "--format", "json"])
