"""Start options dex does not apply yet are refused at start, never silently ignored."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from dexcli import AsyncClient, IdReusePolicy, StartFlowOptions
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.testing import DexTestEnv
from flows.three_steps import ThreeStepFlow


@pytest.mark.parametrize("options,named", [
    (StartFlowOptions(timeout=timedelta(seconds=60)), "timeout"),
    (StartFlowOptions(start_delay=timedelta(hours=1)), "start_delay"),
    (StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_IF_NOT_RUNNING), "id_reuse_policy=ALLOW_IF_NOT_RUNNING"),
])
def test_an_unapplied_start_option_fails_the_start_and_starts_nothing(options: StartFlowOptions,
                                                                       named: str) -> None:
    with DexTestEnv() as env:
        with pytest.raises(NotSupportedYetError, match=named):
            env.client.start_flow(ThreeStepFlow(), "f", 1, options)
        assert env.store.get_flow("f") is None

        async def start_async() -> str:
            return await AsyncClient(engine=env.engine).start_flow(ThreeStepFlow(), "g", 1, options)

        with pytest.raises(NotSupportedYetError, match=named):
            asyncio.run(start_async())
        assert env.store.get_flow("g") is None


def test_the_options_dex_applies_still_start_the_flow() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(ThreeStepFlow(), "f", 1, StartFlowOptions(request_id="r1"))
        assert env.store.get_flow("f") is not None
