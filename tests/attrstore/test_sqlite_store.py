"""Synced attributes projected into SQLite Attribute Stores, in virtual time: writes,
overwrites, deletes (SQL NULL), maps, two stores, values a column cannot take, and what a flow
keeps seeing (its own attributes, never the store)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dexcli import FlowConfig, StartFlowOptions
from dexcli.engine.attribute_sync import AttributeStores, UnknownAttributeStoreError, projections
from dexcli.store.attribute_targets import AttributeStoreError, StoreSettings
from dexcli.testing import DexTestEnv
from tests.attrstore.stores import Entity, ProfileFlow, config, rows, sqlite_store


@pytest.fixture
def env(tmp_path: Path):
    with DexTestEnv(tmp_path / "dex.db", start=0.0) as e:
        yield e


def test_a_step_s_synced_writes_land_in_the_store_after_its_commit(env: DexTestEnv, tmp_path: Path) -> None:
    store = sqlite_store(tmp_path / "a.db")
    env.engine.use_attribute_stores(config(a=store))
    env.run(ProfileFlow(), {"email": "ada@example.com", "credits": 120, "private": "secret",
                            "balance/eur": 5, "meta": {"source": "x", "tags": ["t"]}}, "user-1")
    row = rows(store)["user-1"]
    assert row["email"] == "ada@example.com" and row["credits"] == 120 and row["balance/eur"] == 5
    assert row["meta"] == '{"source":"x","tags":["t"]}'
    assert row["balance/usd"] is None and row["created"] == "now"  # untouched columns keep their defaults
    assert "secret" not in repr(row)  # an attribute that is not synced stays in dex
    assert {p.key: p.status for p in projections(env.store, "user-1")} == {
        "email": "SYNCED", "credits": "SYNCED", "balance/eur": "SYNCED", "meta": "SYNCED"}


def test_overwrites_and_deletes_project_the_latest_value_and_sql_null(env: DexTestEnv, tmp_path: Path) -> None:
    store = sqlite_store(tmp_path / "a.db")
    env.engine.use_attribute_stores(config(a=store))
    flow = Entity()
    env.start(flow, None, "user-2")
    env.client.invoke_rpc(flow.set_email, "user-2", "one@example.com")
    assert rows(store)["user-2"]["email"] == "one@example.com"  # an RPC's commit projects too, at once
    env.client.invoke_rpc(flow.set_email, "user-2", "two@example.com")
    env.client.invoke_rpc(flow.fund, "user-2", 7)
    assert rows(store)["user-2"]["email"] == "two@example.com" and rows(store)["user-2"]["balance/eur"] == 7
    env.client.invoke_rpc(flow.clear, "user-2")
    row = rows(store)["user-2"]
    assert row["email"] is None and row["credits"] is None  # delete and set(None): SQL NULL, the row stays
    assert row["balance/eur"] == 7
    kept = {k for k, _, _, _ in env.store.read(lambda tx: tx.attribute_values("user-2"))}
    assert kept == {"balance/eur"}  # in dex itself the deleted ones are gone: the store is a projection


def test_two_stores_each_get_every_projection(env: DexTestEnv, tmp_path: Path) -> None:
    a, b = sqlite_store(tmp_path / "a.db"), sqlite_store(tmp_path / "b.db")
    cfg = config(a=a, b=b)
    env.engine.use_attribute_stores(cfg)
    names_both = StartFlowOptions(config_override=FlowConfig(attribute_store_names=["a", "b"]))
    env.client.start_flow(ProfileFlow(), "f", {"email": "x@example.com"}, names_both)
    env.client.wait_for_flow("f")
    assert rows(a)["f"]["email"] == rows(b)["f"]["email"] == "x@example.com"
    env.run(ProfileFlow(), {"email": "d@example.com"}, "g")  # no FlowConfig: the default store only
    assert rows(a)["g"]["email"] == "d@example.com" and "g" not in rows(b)


def test_a_flow_config_naming_only_the_second_store_projects_there(env: DexTestEnv, tmp_path: Path) -> None:
    a, b = sqlite_store(tmp_path / "a.db"), sqlite_store(tmp_path / "b.db")
    env.engine.use_attribute_stores(config(a=a, b=b))
    flow = Entity()
    env.client.start_flow(flow, "e", None, StartFlowOptions(config_override=FlowConfig(attribute_store_names=["b"])))
    env.client.invoke_rpc(flow.set_email, "e", "one@example.com")
    assert "e" not in rows(a) and rows(b)["e"]["email"] == "one@example.com"
    env.client.update_flow_config("e", FlowConfig(attribute_store_names=["a"]))  # from now on: a
    env.client.invoke_rpc(flow.set_email, "e", "two@example.com")
    assert rows(a)["e"]["email"] == "two@example.com" and rows(b)["e"]["email"] == "one@example.com"


def test_a_flow_config_naming_an_unknown_store_is_refused_and_changes_nothing(
        env: DexTestEnv, tmp_path: Path) -> None:
    env.engine.use_attribute_stores(config(a=sqlite_store(tmp_path / "a.db")))
    flow = Entity()
    with pytest.raises(UnknownAttributeStoreError, match="unknown Attribute Store 'nope'"):
        env.client.start_flow(flow, "x", None, StartFlowOptions(config_override=FlowConfig(
            attribute_store_names=["nope"])))
    assert env.store.get_flow("x") is None
    env.client.start_flow(flow, "y", None)
    with pytest.raises(UnknownAttributeStoreError):
        env.client.update_flow_config("y", FlowConfig(attribute_store_names=["a", "nope"]))
    assert env.store.get_flow("y").attribute_store_names is None  # type: ignore[union-attr]


def test_an_empty_store_list_projects_nothing_and_keeps_nothing(env: DexTestEnv, tmp_path: Path) -> None:
    a = sqlite_store(tmp_path / "a.db")
    env.engine.use_attribute_stores(config(a=a))
    env.client.start_flow(ProfileFlow(), "f", {"email": "x@example.com"},
                          StartFlowOptions(config_override=FlowConfig(attribute_store_names=[])))
    env.client.wait_for_flow("f")
    assert rows(a) == {}
    assert [(p.status, p.stores) for p in projections(env.store, "f")] == [("SYNCED", ())]


def test_a_value_the_column_cannot_take_is_skipped_with_its_reason_and_the_rest_is_written(
        env: DexTestEnv, tmp_path: Path) -> None:
    a = sqlite_store(tmp_path / "a.db")
    sync = env.engine.use_attribute_stores(config(a=a))
    env.run(ProfileFlow(), {"email": "x@example.com", "short": "too long", "nowhere": "v"}, "f")
    assert rows(a)["f"]["email"] == "x@example.com" and rows(a)["f"]["short"] is None
    seen = {p.key: p for p in sync.projections("f")}
    assert seen["email"].status == "SYNCED" and seen["email"].stores == ("a",)
    assert seen["short"].skipped and seen["short"].error == "a: text longer than the column"
    assert seen["nowhere"].skipped and seen["nowhere"].error == "a: no such column"


def test_a_store_that_fails_is_retried_with_backoff_until_it_takes_the_write(env: DexTestEnv, tmp_path: Path) -> None:
    a = sqlite_store(tmp_path / "a.db")
    sync = env.engine.use_attribute_stores(config(a=a))
    import sqlite3
    blocker = sqlite3.connect(a, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # the store is locked: the upsert fails (after its busy timeout)
    sync.targets["a"].conn.execute("PRAGMA busy_timeout = 0")  # type: ignore[attr-defined]
    env.run(ProfileFlow(), {"email": "late@example.com"}, "f")
    pending = projections(env.store, "f")
    assert pending[0].pending and pending[0].attempts >= 1 and "locked" in (pending[0].error or "")
    blocker.execute("ROLLBACK")
    t0 = env.clock.now()
    env.drive(["f"], until=lambda: "f" in rows(a))  # the retry timer fires in virtual time
    assert rows(a)["f"]["email"] == "late@example.com"
    assert env.clock.now() - t0 <= 31  # at most BACKOFF_MAX apart


def test_a_store_that_does_not_exist_is_one_clear_error(tmp_path: Path) -> None:
    with DexTestEnv(tmp_path / "dex.db") as env:
        with pytest.raises(AttributeStoreError, match="no SQLite database at .*missing.db"):
            env.engine.use_attribute_stores(config(a=tmp_path / "missing.db"))
        sqlite_store(tmp_path / "nokey.db", "CREATE TABLE profiles (a TEXT, b TEXT NOT NULL)")
        with pytest.raises(AttributeStoreError, match="exactly one primary-key column"):
            env.engine.use_attribute_stores(config(a=tmp_path / "nokey.db"))
        sqlite_store(tmp_path / "nodefault.db", "CREATE TABLE profiles (id TEXT PRIMARY KEY, b TEXT NOT NULL)")
        with pytest.raises(AttributeStoreError, match="'b' is NOT NULL without a default"):
            env.engine.use_attribute_stores(config(a=tmp_path / "nodefault.db"))
        bad = AttributeStores({"a": StoreSettings("a", "sqlite", "nosuch", path=str(tmp_path / "nodefault.db"))})
        with pytest.raises(AttributeStoreError, match="does not exist"):
            env.engine.use_attribute_stores(bad)


def test_without_stores_the_projections_wait_in_the_outbox_for_a_process_that_has_them(tmp_path: Path) -> None:
    a = sqlite_store(tmp_path / "a.db")
    with DexTestEnv(tmp_path / "dex.db") as env:
        env.run(ProfileFlow(), {"email": "kept@example.com"}, "f")  # no stores configured here
    assert rows(a) == {}
    with DexTestEnv(tmp_path / "dex.db") as env:
        env.engine.use_attribute_stores(config(a=a))  # opening them writes what was left
        assert rows(a)["f"]["email"] == "kept@example.com"


def test_route_follows_the_flow_s_store_names_else_the_default() -> None:
    from dexcli.engine.attribute_sync import UnknownAttributeStoreError, check_names, route

    cfg = config(a=Path("a.db"), b=Path("b.db"))  # default: a
    assert route(None, cfg) == ("a",)
    assert route([], cfg) == ()
    assert route(["b", "a", "b"], cfg) == ("b", "a")
    with pytest.raises(UnknownAttributeStoreError, match=r"unknown Attribute Store 'c' \(known: a, b\)"):
        check_names(["a", "c"], cfg)
    assert route(None, AttributeStores({})) == ()


def test_a_flow_naming_an_unknown_store_keeps_its_projections_pending_and_says_why(
        env: DexTestEnv, tmp_path: Path) -> None:
    a = sqlite_store(tmp_path / "a.db")
    sync = env.engine.use_attribute_stores(config(a=a))
    sync.names_of = lambda _flow_id: ["reports"]
    env.run(ProfileFlow(), {"email": "x@example.com"}, "f")
    [p] = projections(env.store, "f")
    assert p.pending and p.error == "unknown Attribute Store 'reports' (known: a)"
    assert env.inspect("f")["state"]["attributeStore"][0]["error"] == p.error
    sync.names_of = lambda _flow_id: ["a"]  # the FlowConfig fixed: the retry writes it
    env.drive(["f"], until=lambda: "f" in rows(a))
    assert rows(a)["f"]["email"] == "x@example.com"


def test_a_time_travelled_run_projects_the_attributes_it_restores(env: DexTestEnv, tmp_path: Path) -> None:
    from dexcli import TimeTravelOptions, TimeTravelType
    from dexcli.sdk.results import StartFlowOptions
    from tests.attrstore.stores import credits as credits_attr

    a = sqlite_store(tmp_path / "a.db")
    env.engine.use_attribute_stores(config(a=a))
    env.client.start_flow(ProfileFlow(), "f", {"email": "x@example.com"},
                          StartFlowOptions().with_attribute(credits_attr, 1))
    env.client.wait_for_flow("f")
    assert rows(a)["f"]["credits"] == 1
    with sqlite3.connect(a) as c:
        c.execute("UPDATE profiles SET credits = 99")  # the store drifted (someone else wrote it)
    env.client.time_travel("f", TimeTravelOptions(TimeTravelType.BEGINNING))
    env.client.wait_for_flow("f")
    assert rows(a)["f"]["credits"] == 1  # the new run's restored attribute went to the store again
