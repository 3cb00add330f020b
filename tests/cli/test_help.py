"""`dex --help` and group help list every command with its whole first sentence: wrapped to the
terminal, never cut short with "..."."""

from __future__ import annotations

import pytest

from dexcli.cli.helptext import first_sentence


@pytest.mark.parametrize("columns", ["80", "120"])
@pytest.mark.parametrize("args", [("--help",), ("time", "--help")])
def test_command_lists_show_whole_first_sentences(cli, args, columns):
    out = cli.ok(*args, env={"COLUMNS": columns}).stdout
    listing = out[out.index("Commands:"):]
    assert "..." not in listing
    assert all(len(ln) <= int(columns) for ln in out.splitlines())
    flat = " ".join(listing.split())
    if args[0] == "--help":
        assert "resume Drive one flow to its end here (after a crash or Ctrl-C), with the live view." in flat
        assert "inspect Show everything about one flow: steps and every attempt, checkpoints, deadlines, " \
               "Streams, history." in flat
    else:
        assert "skip Move the named flows' clocks forward (or every running flow's, with --all)." in flat
        assert "reset Put flows back on real time (what was skipped stays skipped)." in flat


def test_first_sentence():
    assert first_sentence("One two.  Three.\n\nMore.") == "One two."
    assert first_sentence("No full stop\nat all\n\nNext paragraph.") == "No full stop at all"
