"""What a usage error says to type instead: a script's own arguments after `--`, an option
that belongs to the other command; None where click's own words fit best."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Collection, Mapping

import click


def option_arity(command: click.Command) -> dict[str, bool]:
    """Every option name of `command` (`-q`, `--quiet`), and whether it takes a value."""
    with click.Context(command) as ctx:
        options = [p for p in command.get_params(ctx) if isinstance(p, click.Option)]
    return {
        name: not option.is_flag and option.nargs > 0
        for option in options
        for name in option.opts + option.secondary_opts
    }


def run_hint(
    program: str,
    args: list[str],
    error: click.UsageError,
    arity: Mapping[str, bool],
    plain_only: Collection[str],
) -> str | None:
    """`gradcheck run SCRIPT`: an option it does not know, after the script, is most likely
    the script's own (`--epochs 1`), which goes after `--`; one of `plain_only` (`--loss`)
    belongs to `gradcheck MODEL...`."""
    if not isinstance(error, click.NoSuchOption) or _mistyped(error.option_name, arity):
        return None
    option = error.option_name
    ours, script, theirs = _split_script_arguments(args, arity)
    if script is None or option not in {a.split("=")[0] for a in theirs}:
        return None
    instead = shlex.join([*program.split(), script, *ours, "--", *theirs])
    if option in plain_only:
        return (
            f"{program} has no option {option}: it is an option of `gradcheck MODEL...`, which "
            "checks a model without running it as a training script; if it is the script's "
            f"own, it goes after --: {instead}"
        )
    return f"{program} has no option {option}; the script's own arguments go after --: {instead}"


def plain_hint(
    program: str,
    args: list[str],
    error: click.UsageError,
    arity: Mapping[str, bool],
    subcommands: Mapping[str, Collection[str]],
) -> str | None:
    """`gradcheck MODEL...`: an option of a subcommand (`--continue`) says so; an unknown
    option right after the one script checked (`gradcheck train.py --epochs 1`) may be the
    script's own, which only `gradcheck run` passes on."""
    if not isinstance(error, click.NoSuchOption):
        return None
    option = error.option_name
    for name, options in subcommands.items():
        if option in options:
            return (
                f"{program} has no option {option}: it is an option of `{program} {name}` "
                f"({program} {name} --help lists its options)"
            )
    _, script, theirs = _split_script_arguments(args, arity)
    if script is None or not script.endswith(".py") or theirs[:1] != [option]:
        return None
    if _mistyped(option, arity):
        return None
    if any(not a.startswith("-") and a.endswith((".py", ".keras", ".h5")) for a in theirs):
        return None  # more models to check: not one script's arguments
    # Perhaps an option of gradcheck's, misremembered: click's words and guesses first.
    return (
        f"{error.format_message()} If it is {script}'s own, a plain check cannot pass it "
        "(it imports the script without arguments); check the script as it trains, with "
        f"its arguments: {shlex.join([*program.split(), 'run', script, '--', *theirs])} "
        f"({program} --help lists the options)"
    )


def _mistyped(option: str, arity: Mapping[str, bool]) -> bool:
    """Whether `option` is one letter away from one of gradcheck's (`--verfy`): click's own
    guess then fits better than the script's arguments."""
    return bool(difflib.get_close_matches(option, arity, n=1, cutoff=0.85))


def _split_script_arguments(
    args: list[str], takes_value: Mapping[str, bool]
) -> tuple[list[str], str | None, list[str]]:
    """`args` as gradcheck's own options (with their values), the script, and the rest,
    which is the script's: everything after the script that is not one of `takes_value`'s
    options, and everything after `--`."""
    ours: list[str] = []
    theirs: list[str] = []
    script: str | None = None
    remaining = iter(args)
    for arg in remaining:
        if arg == "--":
            theirs += remaining
            break
        name = arg.split("=", 1)[0]
        if name in takes_value:
            ours.append(arg)
            value = next(remaining, None) if takes_value[name] and "=" not in arg else None
            ours += [] if value is None else [value]
        elif arg.startswith("-") and len(arg) > 1 and _known_short_flags(arg, takes_value):
            ours.append(arg)
        elif script is None and not arg.startswith("-"):
            script = arg
        elif script is not None:
            theirs.append(arg)
        else:
            ours.append(arg)
    return ours, script, theirs


def _known_short_flags(arg: str, takes_value: Mapping[str, bool]) -> bool:
    """`-qv` (flags gradcheck knows, written together) or `-fjson` (a short option and its
    value)."""
    if arg.startswith("--"):
        return False
    if takes_value.get(arg[:2]):
        return True
    return all(takes_value.get(f"-{letter}") is False for letter in arg[1:])
