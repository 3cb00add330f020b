"""At 80 columns, in a real terminal (a pseudo-terminal of 80x24 around the real `dex`): ids are
never split inside, a `dex list` row is one line, the live view's footer keeps each command
whole, the Ctrl-C message wraps between words; `dex time` is aligned and lists open flows."""

from __future__ import annotations

import pytest

from tests.cli.cli_helpers import dex_in_terminal

pytestmark = pytest.mark.timeout(180)

LONG_ID = "RecordSettlement-flow-1"


@pytest.fixture
def some_flows(cli):
    cli.ok("run", "payment", "--flow-id", LONG_ID, "--input", '{"payment_id": "p-1", "amount": 250}', "--time-skip")
    cli.ok("run", "polling", "--flow-id", "p", "--time-skip")
    cli.ok("run", "approval", "--flow-id", "a", "--input", '{"title": "a long title for a request", '
           '"expire_after_seconds": 1}', "--time-skip")
    return cli


def test_a_list_row_is_one_line_and_keeps_the_whole_id(some_flows, db):
    code, lines = dex_in_terminal(db, "list")
    assert code == 0, lines
    assert all(len(ln) <= 80 for ln in lines), lines
    rows = [ln for ln in lines if ln.strip() and not ln.startswith(("flow id", " "))]
    assert [r.split()[0] for r in rows] == ["a", "p", LONG_ID], lines  # newest first, one line each
    assert len([ln for ln in lines if ln.strip()]) <= 1 + len(rows) + 2, lines  # the head, a note at most


def test_inspect_never_splits_a_step_id(some_flows, db):
    code, lines = dex_in_terminal(db, "inspect", LONG_ID)
    assert code == 0
    assert all(len(ln) <= 80 for ln in lines), lines
    assert any(ln.startswith("RecordSettlement-1 ") for ln in lines), lines
    assert all("RecordSettle" not in ln or "RecordSettlement" in ln for ln in lines), lines  # in goTo too


def test_the_ctrl_c_message_wraps_between_words_under_itself(db):
    code, lines = dex_in_terminal(db, "run", "polling", "--flow-id", "polling-with-a-long-id-12345",
                                  ctrl_c_after="RUNNING  #AwaitJob-1")
    assert code == 130, lines
    message = lines[next(i for i, ln in enumerate(lines) if ln.startswith("Interrupted.")):]
    message = [ln for ln in message if ln.strip()]
    assert all(len(ln) <= 80 for ln in message), message
    assert all(ln.startswith("  ") for ln in message[1:]), message
    said = " ".join(ln.strip() for ln in message)
    assert "Resume it with: dex resume polling-with-a-long-id-12345 (the attempt that was running ended INTERRUPTED" \
        in said, said  # every word whole: joined back by spaces, the message reads as written
    assert "resume starts the next one at once, from its last checkpoint)" in said, said


def test_the_live_view_footer_keeps_each_command_whole():
    import io

    from rich.console import Console

    from dexcli.cli.render import live_view
    from dexcli.plugins import Hint
    from dexcli.testing import DexTestEnv
    from dexcli_flows.polling import PollingFlow
    from tests.engine.engine_helpers import inspect_when

    fid = "polling-with-a-long-id-12345"
    with DexTestEnv() as env:
        env.start(PollingFlow(), flow_id=fid)
        snap = inspect_when(env, fid, lambda: any(a.heartbeats for a in env.store.attempts_of(fid)))
    console = Console(width=80, record=True, no_color=True, file=io.StringIO())
    console.print(live_view(snap, "/tmp/dex.db", hints=(Hint(f"complete early:  dex complete-job {fid}"),)))
    lines = console.export_text().splitlines()
    footer = lines[next(i for i, ln in enumerate(lines) if "complete early:" in ln):]
    assert footer == [f" complete early:  dex complete-job {fid}", f"   inspect:  dex inspect {fid}"], footer
