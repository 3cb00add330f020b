"""Flow plugins (dexcli.plugins): a package installed beside dex contributes a flow name, `dex run`
options and a command, found through the `dex.flows` entry points; and `dex run` builds one engine."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dexcli.cli.discovery import EntryPoint, discover, installed, parse_entry_points
from tests.cli.cli_helpers import assert_error, subprocess_env

PLUGIN_MODULE = '''
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete
from dexcli.host import current_host
from dexcli.plugins import Argument, Command, CommandContext, FlowPlugin, NotFoundError, Option, RunContext

SEEN = []


class Greet(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        greeting = current_host().kv_get("greet", context.flow_id)
        return graceful_complete(" ".join([greeting] * n))


class GreetFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Greet())


def before_start(run: RunContext) -> None:
    SEEN.append(dict(run.options))
    run.host.kv_put("greet", run.flow_id, run.options["greeting"] or "hello")


def show(ctx: CommandContext, flow_id: str, times: int | None) -> int:
    greeting = ctx.host.kv_get("greet", flow_id)
    if greeting is None:
        raise NotFoundError(f"no greeting for flow {flow_id!r}")
    print(f"{flow_id} says {greeting} x{times or 1}")
    return 0


PLUGIN = FlowPlugin(
    name="greet",
    flow=GreetFlow,
    description="Says its greeting n times.",
    run_options=(Option("--greeting", "What the flow says."), Option("--pause", "A duration.", kind="duration")),
    before_start=before_start,
    commands=(Command("greeting", show, "Show what a greet flow says.", arguments=(Argument("flow_id", "The flow."),),
                      options=(Option("--times", "How often.", kind="int"),)),),
    hints=("greeting:  dex greeting {flow_id}",),
)
'''

ENTRY_POINTS = """
[console_scripts]
greet-tool = dex_test_plugin:main

[dex.flows]
greet = dex_test_plugin:PLUGIN
"""


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A distribution `dex-test-plugin` on sys.path, as pip would install it, with the plugin `greet`."""
    site = tmp_path / "site"
    info = site / "dex_test_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "dex_test_plugin.py").write_text(textwrap.dedent(PLUGIN_MODULE))
    monkeypatch.syspath_prepend(str(site))
    installed.cache_clear()
    yield site
    installed.cache_clear()
    sys.modules.pop("dex_test_plugin", None)


def test_entry_points_are_read_by_group():
    text = "[console_scripts]\nx = a:b\n\n[dex.flows]\n# a comment\npolling = dexcli_flows.plugins:POLLING\n"
    assert parse_entry_points(text, "dex.flows", "d") == [EntryPoint("polling", "dexcli_flows.plugins:POLLING", "d")]


def test_the_examples_are_plugins_like_any_other():
    found = installed()
    assert list(found.plugins) == ["approval", "fan-out", "payment", "polling", "three-steps"]
    polling = found.plugins["polling"]
    assert [o.name for o in polling.run_options] == ["--job-duration", "--job-fails"]
    assert [c.name for c in polling.commands] == ["complete-job"]
    assert found.for_ref("name:polling") is polling and found.for_ref("file:/x.py:PollingFlow") is None


def test_a_plugin_that_is_not_a_flow_plugin_or_takes_a_name_is_skipped_with_a_warning():
    mod = "dexcli_flows.plugins"
    eps = [EntryPoint("a", f"{mod}:POLLING", "one"), EntryPoint("b", f"{mod}:configure_job", "two"),
           EntryPoint("c", f"{mod}:POLLING", "three"), EntryPoint("d", f"{mod}:THREE_STEPS", "four")]
    found = discover(eps)
    assert list(found.plugins) == ["polling", "three-steps"]
    assert len(found.warnings) == 1 and "is not a dexcli.plugins.FlowPlugin" in found.warnings[0]


def test_a_plugin_contributes_a_name_options_and_a_command(cli, plugin_dir):
    flows = cli.ok("flows", db=False)
    assert any(ln.startswith("greet ") and "GreetFlow" in ln and "Says its greeting" in ln
               for ln in flows.stdout.splitlines())
    assert flows.stderr == ""
    root = cli.ok("--help").stdout
    commands = [ln.split()[0] for ln in root.split("Commands:")[1].splitlines() if ln.strip()]
    assert commands[commands.index("flows") + 1:commands.index("stop")] == ["greeting", "complete-job"]
    run_help = cli.ok("run", "--help").stdout
    assert "--greeting" in run_help and "[greet] What the flow says." in run_help
    assert "[polling] How long the simulated job runs" in run_help


def test_a_plugins_run_options_reach_it_before_the_flow_starts(cli, plugin_dir):
    res = cli.ok("run", "greet", "--flow-id", "g", "--input", "2", "--greeting", "hi", "--pause", "2m")
    assert "result: \"hi hi\"" in res.stdout
    import dex_test_plugin

    assert dex_test_plugin.SEEN == [{"greeting": "hi", "pause": 120.0}]
    res = cli.ok("greeting", "g", "--times", "3")
    assert res.stdout.strip() == "g says hi x3"
    assert_error(cli("greeting", "nobody"), 3, "no greeting for flow 'nobody'")
    assert_error(cli("greeting", "g", "--times", "often"), 2, "--times", "not a whole number")


def test_a_plugins_int_and_duration_options_are_bounded(cli, plugin_dir):
    cli.ok("run", "greet", "--flow-id", "g", "--input", "2", "--greeting", "hi")
    assert_error(cli("greeting", "g", "--times", str(2**63)), 2, "--times", "out of range")
    assert_error(cli("greeting", "g", "--times", "9" * 5000), 2, "--times", "not a whole number")
    assert_error(cli("run", "greet", "--input", "2", "--pause", "nan"), 2, "--pause", "not a duration")


def test_a_plugins_options_apply_to_its_flow_only(cli, plugin_dir):
    assert_error(cli("run", "three-steps", "--input", "1", "--greeting", "hi"), 2,
                 "--greeting and --pause apply to the greet flow only")
    assert_error(cli("run", "greet", "--input", "1", "--job-fails"), 2, "polling flow only")
    assert_error(cli("run", "greet", "--input", "1", "--pause", "soon"), 2, "--pause: 'soon' is not a duration")


def test_a_plugin_that_cannot_be_loaded_is_skipped_with_a_warning(cli, plugin_dir):
    info = plugin_dir / "dex_broken-0.1.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[dex.flows]\nbroken = dex_test_no_such_module:PLUGIN\n")
    res = cli.ok("flows", db=False)
    names = [ln.split()[0] for ln in res.stdout.splitlines()]
    assert names == ["approval", "fan-out", "greet", "payment", "polling", "three-steps"]
    assert res.stderr.splitlines() == [
        "dex: warning: flow plugin dex_test_no_such_module:PLUGIN (entry point 'broken' of dex_broken) cannot be "
        "loaded: ModuleNotFoundError: No module named 'dex_test_no_such_module'"]


def test_commands_that_need_no_plugin_do_not_look_for_them(cli):
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")
    installed.cache_clear()
    for args in (["list"], ["inspect", "t"], ["time"], ["doctor"], ["resume", "t"], ["stop", "--help"]):
        cli(*args)
    assert installed.cache_info().currsize == 0
    cli.ok("--help")
    assert installed.cache_info().currsize == 1


def test_plugins_are_found_in_a_fresh_process(tmp_path, plugin_dir):
    env = subprocess_env(tmp_path / "dex.db")
    env["PYTHONPATH"] = str(plugin_dir) + ":" + env["PYTHONPATH"]
    res = subprocess.run([sys.executable, "-m", "dexcli", "flows"], env=env, capture_output=True, text=True,
                         timeout=30, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    names = [ln.split()[0] for ln in res.stdout.splitlines()]
    assert names == ["approval", "fan-out", "greet", "payment", "polling", "three-steps"]


# ------------------------------------------------------------------------- one engine per run
COUNTING_FLOW = '''
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete

CREATED = []


class Only(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(len(CREATED))


class CountingFlow(Flow[int]):
    def __init__(self) -> None:
        CREATED.append(self)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Only())
'''


def test_dex_run_builds_one_engine_and_runs_the_flow_it_loaded(cli, tmp_path, monkeypatch):
    """The flow object `dex run` loads is the one that runs (it is not loaded again from its
    stored reference), one Engine is built, and the database is opened twice: once for the
    engine, once for the live view's own thread."""
    import dexcli.cli.driver as driver
    from dexcli.store import Store

    engines, stores = [], []

    class CountingEngine(driver.Engine):
        def __init__(self, *args, **kw):
            engines.append(self)
            super().__init__(*args, **kw)

    original_init = Store.__init__

    def counting_init(self, *args, **kw):
        stores.append(args[0] if args else kw.get("path"))
        original_init(self, *args, **kw)

    monkeypatch.setattr(driver, "Engine", CountingEngine)
    monkeypatch.setattr(Store, "__init__", counting_init)
    path = tmp_path / "counting.py"
    path.write_text(textwrap.dedent(COUNTING_FLOW))
    res = cli.ok("run", "--file", f"{path}:CountingFlow", "--flow-id", "c", "--input", "0")
    assert "result: 1" in res.stdout  # the step saw one CountingFlow: the one loaded from --file
    assert len(engines) == 1
    assert len(stores) == 2


def test_a_flow_whose_plugin_is_gone_is_skipped_by_the_worker_and_refused_by_resume(cli, db):
    from dexcli.cli.driver import build_engine
    from dexcli.store import Store
    from dexcli_flows.three_steps import ThreeStepFlow

    store = Store(db)
    build_engine(store, time_skip=False).start_flow(ThreeStepFlow(), "orphan", 1, flow_ref="name:uninstalled")
    store.close()
    res = cli.ok("worker", "--until-idle", "--time-skip")
    assert "dex: flow orphan skipped: unknown flow 'uninstalled'" in res.stderr
    assert_error(cli("resume", "orphan"), 2, "cannot run flow orphan", "unknown flow 'uninstalled'")
