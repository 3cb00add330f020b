"""The payment example follows the seed's Locks rule; its variant that locks the polling step
is what `dex lint` flags."""

from __future__ import annotations

from dexcli.graph.lint import lint_flow
from dexcli_flows.payment import PaymentFlow
from tests.graph.bad_flows.lock_held_payment import LockedPaymentFlow


def test_the_payment_example_has_no_findings() -> None:
    report = lint_flow(PaymentFlow())
    assert report.findings == [] and report.graph.valid


def test_locking_the_polling_step_is_flagged_at_its_options() -> None:
    report = lint_flow(LockedPaymentFlow())
    [finding] = [f for f in report.findings if f.rule == "lock-held-while-polling"]
    assert finding.file is not None and finding.file.endswith("lock_held_payment.py")
    assert "AwaitPayment holds execute_lock_attributes" in finding.message
