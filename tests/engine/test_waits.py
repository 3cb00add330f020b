"""WaitFor in virtual time: timers fire at their time, channels are consumed by the rules of
their range, any_of picks timers before channels, combinations consume only what they select."""

from __future__ import annotations

import pytest

from dexcli.testing import DexTestEnv
from tests.engine.wait_flows import ChannelFlow, ReplyFlow, TimerFlow


def test_a_timer_fires_at_its_time_and_execute_sees_it() -> None:
    with DexTestEnv(start=1000.0) as env:
        result = env.run(TimerFlow(), 3600, "t")
        assert result.single_output() == {"fired": True, "first": True}
        steps = env.inspect("t")["steps"]
        assert steps[0]["status"] == "COMPLETED"
        # execute started when the timer fired, an hour after the wait was committed
        history = [e["type"] for e in env.inspect("t")["history"]]
        assert history.index("StepWaitForCompleted") < history.index("StepExecuteCompleted")
        assert env.clock.now() >= 1000.0 + 3600


def test_messages_published_before_the_wait_are_consumed_at_once() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(ReplyFlow(), {"before": ["yes", "later"], "timeout": 60}, "r")
        assert result.single_output() == {"replies": ["yes"], "expired": False}
        assert env.clock.now() < 60  # did not wait for the timer


def test_any_of_expires_when_no_message_comes() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(ReplyFlow(), {"before": [], "timeout": 60}, "r")
        assert result.single_output() == {"replies": [], "expired": True}


def test_with_a_timer_and_a_channel_ready_together_the_timer_wins_and_the_message_stays() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(ReplyFlow(), {"before": ["kept"], "timeout": 0}, "r")
        assert result.single_output() == {"replies": [], "expired": True}
        state = env.store.read(lambda tx: tx.pending_messages("r"))
        assert [(q, v) for q, _, v in state] == [("replies", '"kept"')]


@pytest.mark.parametrize(("kind", "published", "consumed"), [
    ("for_n", ["a", "b", "c"], ["a", "b"]),
    ("at_least", ["a", "b", "c"], ["a", "b", "c"]),
    ("at_most", [], []),  # never waits: completes with what is queued (nothing yet)
    ("range", ["a", "b", "c"], ["a", "b"]),
    ("combo", ["a", "b", "c"], ["a", "b", "c"]),
])
def test_channel_ranges_consume_by_their_rules(kind: str, published: list[str], consumed: list[str]) -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(ChannelFlow(), [kind, *published], "c")
        assert result.single_output() == consumed
        left = [v for _, _, v in env.store.read(lambda tx: tx.pending_messages("c"))]
        assert len(left) == len(published) - len(consumed)
