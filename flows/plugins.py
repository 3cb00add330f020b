"""How the examples show up in `dex`: their names (`dex run polling`, `dex flows`), the polling
example's `dex run` options (`--job-duration`, `--job-fails`) and its `dex complete-job` command,
and the approval example's hints (the `dex rpc` and `dex skip-timer` that move it on).

Named in pyproject.toml under `[project.entry-points."dex.flows"]` (see dexcli.plugins). Light on
purpose: `dex --help` imports this module to list `complete-job`; the flows themselves are
named as "module:attr" and load when they run.
"""

from __future__ import annotations

from dexcli.plugins import (
    Argument,
    Command,
    CommandContext,
    ConflictError,
    FlowPlugin,
    Hint,
    NotFoundError,
    Option,
    RunContext,
    UsageError,
)
from dexcli_flows.job_service import FakeJobService


def configure_job(run: RunContext) -> None:
    """Before a polling flow starts: how its simulated job will behave."""
    FakeJobService(run.host).configure_job(run.flow_id, duration_seconds=run.options["job_duration"],
                                           fails=run.options["job_fails"])


def complete_job(ctx: CommandContext, flow_id: str | None) -> None:
    """`dex complete-job [FLOW_ID]`: finish the job early (default: the one running polling flow).
    Unknown flow: exit 3; a flow that has ended: exit 4 (`flow already COMPLETED`)."""
    if flow_id is None:
        running = ctx.running_flow_ids("PollingFlow")
        if not running:
            raise NotFoundError("no polling flow is running; name one: dex complete-job FLOW_ID")
        if len(running) > 1:
            raise UsageError(f"{len(running)} polling flows are running ({', '.join(running[:5])}); name one")
        flow_id = running[0]
    status = ctx.flow_status(flow_id)
    if status is None:
        raise NotFoundError(f"no flow with id {flow_id!r}")
    if status != "RUNNING":
        raise ConflictError(f"flow already {status}: {flow_id} has ended, so its job cannot be completed")
    jobs = FakeJobService(ctx.host)
    try:
        jobs.complete_job(flow_id)
    except LookupError:
        raise NotFoundError(f"no simulated job for flow {flow_id!r} (is it a polling flow that has started?)") from None
    status = jobs.describe_job(flow_id)
    print(f"job {flow_id} completed: {status.state.value if status else 'SUCCEEDED'}"
          f" — the flow sees it at its next poll")


POLLING = FlowPlugin(
    name="polling",
    flow="dexcli_flows.polling:PollingFlow",
    description="Wait for a simulated external job: progress on each status change, result at the end.",
    run_options=(
        Option("--job-duration", "How long the simulated job runs (default 6s; 0s: done at once).", kind="duration"),
        Option("--job-fails", "The simulated job ends FAILED.", kind="flag"),
    ),
    before_start=configure_job,
    commands=(
        Command("complete-job", complete_job, "Finish the simulated job of a polling flow early.",
                arguments=(Argument("flow_id", "The polling flow (default: the one running).", required=False),)),
    ),
    hints=(Hint("complete early:  dex complete-job {flow_id}", while_step="AwaitJob"),),
)

THREE_STEPS = FlowPlugin(
    name="three-steps",
    flow="dexcli_flows.three_steps:ThreeStepFlow",
    description="Three short steps in a row, each checkpointed: the smallest flow to crash and resume.",
)

APPROVAL = FlowPlugin(
    name="approval",
    flow="dexcli_flows.approval:ApprovalFlow",
    description="Wait for a person: approve/reject RPCs from another terminal, or expire after 24 h.",
    hints=(Hint("decide:  dex rpc {flow_id} approve --input '\"dana\"'", while_step="AwaitDecision"),
           Hint("expire now:  dex skip-timer {flow_id} AwaitDecision-1 --condition-id expire",
                while_step="AwaitDecision")),
)

PAYMENT = FlowPlugin(
    name="payment",
    flow="dexcli_flows.payment:PaymentFlow",
    description="Poll a payment without a lock, then record it under an Attribute lock in a short step.",
    hints=("settled total:  dex rpc {flow_id} settled",),
)

FAN_OUT = FlowPlugin(
    name="fan-out",
    flow="dexcli_flows.fan_out:FanOutFlow",
    description="Fan out to N SubFlows (each a flow of its own: i*i after i*5 s) and wait for all of them.",
    hints=("children:  dex list",),
)
