"""The payment example in virtual time: it polls without a lock, then records the settled
amount under the lock; the `settled` RPC reads it, also after the flow closed."""

from __future__ import annotations

from dexcli.testing import DexTestEnv
from dexcli_flows.payment import Payment, PaymentFlow


def test_a_payment_settles_and_is_recorded_under_the_lock() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = PaymentFlow()
        result = env.run(flow, Payment("p-1", 250, polls_to_settle=3, poll_seconds=2), "p")
        assert result.single_output() == 250
        assert env.clock.now() >= 4  # two sleeps between three polls
        assert env.client.invoke_rpc(flow.settled, "p") == 250
        steps = {s["stepType"]: s for s in env.inspect("p")["steps"]}
        assert steps["AwaitPayment"]["status"] == "COMPLETED"
        assert env.store.read(lambda tx: tx.locks_of("p", env.clock.now())) == []  # released
