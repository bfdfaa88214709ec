"""`--help` lists the options by group, and the documentation's Options page documents every
option of both commands and its Configuration page every `[tool.gradcheck]` key, read off the
click commands and config.py's key table."""

from __future__ import annotations

import re

import click
import pytest

from gradcheck_cli.cli import command, run_command
from gradcheck_cli.cli.options import COMMANDS as COMMANDS_HEADING
from gradcheck_cli.cli.options import GROUPS, HELP
from gradcheck_cli.config import KEYS
from gradcheck_cli.options import TIMEOUT_VARIABLE
from tests.cli_runs import cli_result
from tests.docs_pages import page, section

COMMANDS = {"gradcheck": command, "gradcheck run": run_command}


def _options(cmd: click.Command) -> list[click.Option]:
    with click.Context(cmd) as ctx:
        params = cmd.get_params(ctx)
    return [param for param in params if isinstance(param, click.Option)]


def _names(cmd: click.Command) -> list[str]:
    return [name for option in _options(cmd) for name in option.opts + option.secondary_opts]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_is_on_the_options_page(name: str) -> None:
    options = page("options.md").read_text()
    names = _names(COMMANDS[name])
    assert "--loss" in _names(command) and "--continue" in _names(run_command)
    missing = [n for n in names if not re.search(rf"`{re.escape(n)}[` ]", options)]
    assert missing == [], f"{name}: options missing from docs/options.md"


def test_every_config_key_and_the_timeout_variable_are_in_the_configuration_section() -> None:
    configuration = section("configuration.md", "Configuration: `[tool.gradcheck]`")
    assert "models" in KEYS
    missing = [
        key for key in KEYS if not re.search(rf"^\| `{re.escape(key)}` \|", configuration, re.M)
    ]
    assert missing == []
    assert f"`{TIMEOUT_VARIABLE}`" in page("options.md").read_text()


@pytest.mark.parametrize("name", COMMANDS)
def test_help_lists_every_option_under_its_group(name: str) -> None:
    cmd = COMMANDS[name]
    result = cli_result(cmd, ["--help"], prog_name=name)
    assert result.exit_code == 0
    headings = re.findall(r"^(\S[^:\n]*):$", result.stdout, re.M)
    # `gradcheck --help` lists `gradcheck run` under COMMANDS before its options.
    assert headings == [*([COMMANDS_HEADING] if cmd is command else []), *GROUPS, HELP]
    # Each option under exactly one heading, and the last group holds only help and debugging.
    sections = re.split(r"^\S[^:\n]*:$", result.stdout, flags=re.M)[-len(GROUPS) - 1 :]
    for option in _options(cmd):
        long_name = max(option.opts, key=len)
        holding = [s for s in sections if re.search(rf"^\s+(-\w, )?{long_name}\b", s, re.M)]
        assert len(holding) == 1, long_name
    last = {m for m in re.findall(r"^\s+(?:-\w, )?(--[\w-]+)", sections[-1], re.M)}
    assert last <= {"--explain", "--version", "--debug", "--help"}
