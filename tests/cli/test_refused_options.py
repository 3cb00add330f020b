"""`dex run --file` of a flow whose options the official SDK or the server would refuse (issue
23, rules 6 and 16): one `dex: error:` line naming the flow, the step and the value; exit 2;
nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.cli_helpers import Cli, assert_error

FLOW = '''
from datetime import timedelta

from dexcli import Context, Flow, RetryPolicy, Step, StepDecision, StepList, StepOptions, graceful_complete


class Work(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions({options})

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class OptionsFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Work())
'''


@pytest.mark.parametrize(("options", "said"), [
    ("execute_method_timeout=timedelta(seconds=1.5)",
     "execute_method_timeout 1.5 s: a duration must be whole seconds within int32"),
    ("execute_retry=RetryPolicy(backoff_coefficient=0.5)", "execute_retry.backoff_coefficient 0.5 is less than 1"),
    ("execute_retry=RetryPolicy(initial_interval=timedelta(seconds=30), maximum_interval=timedelta(seconds=10))",
     "execute_retry.maximum_interval 10 s is less than initial_interval 30 s"),
])
def test_run_refuses_the_flow_in_one_line(cli: Cli, tmp_path: Path, options: str, said: str) -> None:
    path = tmp_path / "options_flow.py"
    path.write_text(FLOW.format(options=options))
    assert_error(cli("run", "--file", f"{path}:OptionsFlow", "--input", "1", "--flow-id", "o"), 2,
                 "flow OptionsFlow, step Work: " + said)
    assert not cli.db.exists() or cli.json("list", "--json") == []
