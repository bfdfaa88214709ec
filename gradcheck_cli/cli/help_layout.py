"""`--help` and the usage lines, laid out by cloup: the options under their groups, and the
commands `gradcheck MODEL...` hands over to. Imported for help and usage alone: cloup's import
is a tenth of a SavedModel's check, which shows neither."""

from __future__ import annotations

import copy

import click
import cloup

from gradcheck_cli.cli.options import COMMANDS, GROUPS, HELP, ModelCommand, group_title


def help_text(command: click.Command, ctx: click.Context) -> str:
    """`command`'s `--help`, for the context it was invoked in."""
    layout = _layout(command)
    return layout.get_help(_layout_context(layout, ctx))


def usage_text(command: click.Command, ctx: click.Context) -> str:
    """`command`'s usage lines (a usage error's first lines), for the context it was invoked in."""
    layout = _layout(command)
    return layout.get_usage(_layout_context(layout, ctx))


def _layout(command: click.Command) -> _Layout:
    if isinstance(command, ModelCommand):
        return _ModelLayout(command, command.subcommands)
    return _Layout(command)


def _layout_context(layout: cloup.Command, ctx: click.Context) -> cloup.Context:
    """A cloup context for `layout` where click made `ctx`: the same name, parent and settings
    (cloup's formatter lays out the groups)."""
    return cloup.Context(
        layout,
        info_name=ctx.info_name,
        parent=ctx.parent,
        terminal_width=ctx.terminal_width,
        max_content_width=ctx.max_content_width,
        help_option_names=ctx.help_option_names,
        color=ctx.color,
        show_default=ctx.show_default,
    )


class _Layout(cloup.Command):
    """A command's help as cloup lays it out: each option under the group `grouped_options`
    gave it, the ungrouped ones (`--help` included) last under HELP."""

    def __init__(self, command: click.Command) -> None:
        groups: dict[str, cloup.OptionGroup] = {}
        params = []
        for param in command.params:
            title = group_title(param)
            if title is not None:
                group = groups.setdefault(title, cloup.OptionGroup(title, help=GROUPS[title]))
                param = copy.copy(param)
                param.group = group  # type: ignore[attr-defined]  # cloup's mark of a group
            params.append(param)
        super().__init__(
            command.name,
            params=params,
            help=command.help,
            epilog=command.epilog,
            short_help=command.short_help,
            options_metavar=command.options_metavar,
            add_help_option=command.add_help_option,
            hidden=command.hidden,
            deprecated=command.deprecated,
        )

    def get_default_option_group(
        self, ctx: click.Context, is_the_only_visible_option_group: bool = False
    ) -> cloup.OptionGroup:
        group = cloup.OptionGroup(HELP)
        group.options = self.get_ungrouped_options(ctx)
        return group


class _ModelLayout(_Layout):
    """`gradcheck MODEL...`'s help, which also shows the commands `main` hands the command line
    to when it starts with their name (`gradcheck run SCRIPT`): their usage under its own, and
    a section that lists them."""

    def __init__(self, command: click.Command, subcommands: tuple[click.Command, ...]) -> None:
        super().__init__(command)
        self.subcommands = subcommands

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_usage(ctx, formatter)
        for subcommand, sub_ctx in self._subcommand_contexts(ctx):
            pieces = " ".join(subcommand.collect_usage_pieces(sub_ctx))
            # cloup's formatter adds a space after the prefix: "Usage:" and its space.
            formatter.write_usage(sub_ctx.info_name or "", pieces, prefix=" " * len("Usage:"))

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        rows = [
            (
                f"{subcommand.name} {' '.join(subcommand.collect_usage_pieces(sub_ctx)[1:])}",
                f"{subcommand.get_short_help_str(limit=300)} ({sub_ctx.info_name} --help "
                "lists its options.)",
            )
            for subcommand, sub_ctx in self._subcommand_contexts(ctx)
        ]
        if rows:
            with formatter.section(COMMANDS):
                formatter.write_dl(rows)

    def _subcommand_contexts(self, ctx: click.Context) -> list[tuple[click.Command, click.Context]]:
        # Named as typed (`gradcheck run`): click's own command path of a command under a
        # command puts the parent's arguments between them.
        return [
            (subcommand, click.Context(subcommand, info_name=f"{ctx.info_name} {subcommand.name}"))
            for subcommand in self.subcommands
        ]
