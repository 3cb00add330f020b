"""`dex --help` lists each command with the whole first sentence of its help, never cut with
"..." (click shortens it to fit the line; dex wraps it instead)."""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup


def first_sentence(help_text: str) -> str:
    """The first paragraph's words up to the first one that ends a sentence (all of them if
    none does)."""
    words = help_text.split("\n\n", 1)[0].split()
    for i, word in enumerate(words):
        if word.endswith((".", "!", "?")):
            return " ".join(words[: i + 1])
    return " ".join(words)


class FullHelpGroup(TyperGroup):
    """A command group whose command list shows each command's full first sentence."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.short_help and cmd.help:
                cmd.short_help = first_sentence(cmd.help)
        super().format_commands(ctx, formatter)
