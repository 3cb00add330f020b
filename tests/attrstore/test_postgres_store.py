"""Synced attributes projected into a real PostgreSQL server (started by the test: see
tests/attrstore/postgres.py), and Dex's patterns/entity-store example ported to SDK 1.23 and
driven as its controller drives it (create, update, read, clear), in virtual time.

The port: imports from dexcli; the controller's StartFlowOptions(config_override=
FlowConfig(attribute_store_name="entityStore")) becomes dex.toml's default store being
entityStore (FlowConfig's attribute_store_names is routed by `route` once FlowConfig lands)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dexcli import Attribute, Context, Flow, PersistenceSchema, RPCResult, StepList, rpc
from dexcli.engine.attribute_sync import GIVE_UP_ATTEMPTS, GIVE_UP_SECONDS, AttributeStores
from dexcli.engine.doctor import check
from dexcli.sdk.results import StartFlowOptions
from dexcli.store.attribute_targets import AttributeStoreError, StoreSettings
from dexcli.testing import DexTestEnv

# the example's examples/entity-store/postgres/init.sql
INIT_SQL = """CREATE TABLE user_profiles (
    user_id TEXT PRIMARY KEY,
    display_name TEXT,
    email TEXT,
    marketing_opt_in BOOLEAN,
    credits BIGINT,
    weight DOUBLE PRECISION,
    last_logged_in_time TIMESTAMPTZ,
    metadata JSONB
)"""


@pytest.fixture
def database(pg_dsn: str) -> Iterator[str]:
    """A fresh database with the example's table; its DSN."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    dsn = pg_dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(INIT_SQL)
    yield dsn


def entity_store(dsn: str, table: str = "public.user_profiles") -> AttributeStores:
    return AttributeStores({"entityStore": StoreSettings("entityStore", "postgres", table, dsn=dsn)},
                           default="entityStore")


def select(dsn: str, user_id: str) -> dict[str, Any] | None:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, row_factory=dict_row) as c:
        return c.execute("SELECT * FROM user_profiles WHERE user_id = %s", (user_id,)).fetchone()


# ------------------------------------------------- patterns/entity-store, ported to 1.23 -----
@dataclass
class UserProfileMetadata:
    source: str
    tags: list[str]

    def validate(self) -> None:
        if not self.source:
            raise ValueError("metadata.source is required")


@dataclass
class UserProfile:
    display_name: str
    email: str
    marketing_opt_in: bool
    credits: int
    weight: float
    last_logged_in_time: datetime
    metadata: UserProfileMetadata

    def validate(self) -> None:
        if not self.display_name:
            raise ValueError("display_name is required")
        if not self.email:
            raise ValueError("email is required")
        if self.last_logged_in_time.tzinfo is None:
            raise ValueError("last_logged_in_time must include a timezone")
        self.metadata.validate()


class UserProfileFlow(Flow[None]):
    display_name = Attribute("display_name", str, sync_to_attribute_store=True)
    email = Attribute("email", str, sync_to_attribute_store=True)
    marketing_opt_in = Attribute("marketing_opt_in", bool, sync_to_attribute_store=True)
    credits = Attribute("credits", int, sync_to_attribute_store=True)
    weight = Attribute("weight", float, sync_to_attribute_store=True)
    last_logged_in_time = Attribute("last_logged_in_time", datetime, sync_to_attribute_store=True)
    metadata = Attribute("metadata", UserProfileMetadata, sync_to_attribute_store=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.display_name, self.email, self.marketing_opt_in, self.credits,
                                    self.weight, self.last_logged_in_time, self.metadata)

    @rpc
    def update_profile(self, context: Context, input: UserProfile) -> None:
        input.validate()
        self.display_name.set(context, input.display_name)
        self.email.set(context, input.email)
        self.marketing_opt_in.set(context, input.marketing_opt_in)
        self.credits.set(context, input.credits)
        self.weight.set(context, input.weight)
        self.last_logged_in_time.set(context, input.last_logged_in_time)
        self.metadata.set(context, input.metadata)

    @rpc
    def get_profile(self, context: Context) -> RPCResult[UserProfile]:
        return RPCResult(UserProfile(self.display_name.get(context), self.email.get(context),
                                     self.marketing_opt_in.get(context), self.credits.get(context),
                                     self.weight.get(context), self.last_logged_in_time.get(context),
                                     self.metadata.get(context)))

    @rpc
    def clear_profile(self, context: Context) -> None:
        self.display_name.delete(context)
        self.email.delete(context)
        self.marketing_opt_in.delete(context)
        self.credits.delete(context)
        self.weight.delete(context)
        self.last_logged_in_time.delete(context)
        self.metadata.delete(context)


def create_user_profile(env: DexTestEnv, flow: UserProfileFlow, user_id: str, profile: UserProfile) -> None:
    """The controller's POST /profile."""
    options = (StartFlowOptions(timeout=timedelta(hours=1))
               .with_attribute(flow.display_name, profile.display_name)
               .with_attribute(flow.email, profile.email)
               .with_attribute(flow.marketing_opt_in, profile.marketing_opt_in)
               .with_attribute(flow.credits, profile.credits)
               .with_attribute(flow.weight, profile.weight)
               .with_attribute(flow.last_logged_in_time, profile.last_logged_in_time)
               .with_attribute(flow.metadata, profile.metadata))
    env.client.start_flow(flow, user_id, None, options)


ADA = UserProfile("Ada Lovelace", "ada@example.com", True, 120, 59.5, datetime(2026, 8, 11, 15, 30, tzinfo=UTC),
                  UserProfileMetadata("example", ["computing", "poetry"]))
BYRON = UserProfile("Ada Byron", "ada.byron@example.com", False, 180, 60.25,
                    datetime(2026, 8, 12, 9, 45, tzinfo=UTC), UserProfileMetadata("example", ["computing", "history"]))


def test_entity_store_create_update_get_clear_as_its_readme_says(database: str, tmp_path: Path) -> None:
    with DexTestEnv(tmp_path / "dex.db", start=0.0) as env:
        env.engine.use_attribute_stores(entity_store(database))
        flow = UserProfileFlow()
        create_user_profile(env, flow, "user-42", ADA)
        row = select(database, "user-42")  # the flow id is the user_id primary key
        assert row == {"user_id": "user-42", "display_name": "Ada Lovelace", "email": "ada@example.com",
                       "marketing_opt_in": True, "credits": 120, "weight": 59.5,
                       "last_logged_in_time": datetime(2026, 8, 11, 15, 30, tzinfo=UTC),
                       "metadata": {"source": "example", "tags": ["computing", "poetry"]}}
        env.client.invoke_rpc(flow.update_profile, "user-42", BYRON)  # POST /profile/update
        row = select(database, "user-42")
        assert row is not None and row["display_name"] == "Ada Byron" and row["credits"] == 180
        assert row["marketing_opt_in"] is False and row["weight"] == 60.25
        assert row["last_logged_in_time"] == datetime(2026, 8, 12, 9, 45, tzinfo=UTC)
        assert row["metadata"] == {"source": "example", "tags": ["computing", "history"]}
        got = env.client.invoke_rpc(flow.get_profile, "user-42")  # GET /profile: from Dex, not the store
        assert asdict(got) == asdict(BYRON)
        env.client.invoke_rpc(flow.clear_profile, "user-42")  # POST /profile/clear
        row = select(database, "user-42")
        # "The row remains and its seven projected columns become SQL NULL."
        assert row == {"user_id": "user-42", **{k: None for k in (
            "display_name", "email", "marketing_opt_in", "credits", "weight", "last_logged_in_time", "metadata")}}


def test_a_server_that_goes_away_gets_the_write_when_it_is_back(database: str, tmp_path: Path) -> None:
    import psycopg

    with DexTestEnv(tmp_path / "dex.db", start=0.0) as env:
        sync = env.engine.use_attribute_stores(entity_store(database))
        flow = UserProfileFlow()
        create_user_profile(env, flow, "u", ADA)
        target = sync.targets["entityStore"]
        target.conn.close()  # type: ignore[attr-defined]  # the connection is lost
        env.client.invoke_rpc(flow.update_profile, "u", BYRON)
        assert select(database, "u")["email"] == "ada@example.com"  # type: ignore[index]  # not yet
        [p] = [p for p in sync.projections("u") if p.key == "email"]
        assert p.pending and p.attempts == 1
        env.drive(["u"], until=lambda: select(database, "u")["email"] != "ada@example.com")  # type: ignore[index]
        assert select(database, "u")["email"] == "ada.byron@example.com"  # type: ignore[index]
        assert not target.conn.closed  # type: ignore[attr-defined]  # it reconnected
        assert psycopg  # (imported for the type of the connection only)


def test_an_unreachable_server_or_a_missing_table_is_one_clear_error(database: str, tmp_path: Path) -> None:
    with DexTestEnv(tmp_path / "dex.db") as env:
        with pytest.raises(AttributeStoreError, match="does not exist") as exc:
            env.engine.use_attribute_stores(entity_store(database, "public.nosuch"))
        assert "\n" not in str(exc.value)
        down = "postgresql://postgres:hunter2@127.0.0.1:1/postgres"
        with pytest.raises(AttributeStoreError, match="cannot connect") as exc:
            env.engine.use_attribute_stores(entity_store(down))
        assert "hunter2" not in str(exc.value) and "\n" not in str(exc.value)


def test_a_server_that_stays_away_costs_one_try_a_drain_is_given_up_after_an_hour_and_nothing_is_lost(
        database: str, tmp_path: Path) -> None:
    users = ["u1", "u2", "u3"]
    with DexTestEnv(tmp_path / "dex.db", start=0.0) as env:
        sync = env.engine.use_attribute_stores(entity_store(database))
        flow = UserProfileFlow()
        for u in users:
            create_user_profile(env, flow, u, ADA)
        target: Any = sync.targets["entityStore"]
        target.settings = replace(target.settings, dsn="postgresql://postgres@127.0.0.1:1/postgres")  # gone
        target.conn.close()
        real, connects = target._psycopg, []

        class Counting:
            Error = real.Error

            def connect(self, *args: Any, **kwargs: Any) -> Any:
                connects.append(env.clock.real())
                return real.connect(*args, **kwargs)

        target._psycopg = Counting()
        for u in users:
            env.client.invoke_rpc(flow.update_profile, u, BYRON)
        def emails() -> list[tuple[str, int]]:
            return [(p.status, p.attempts) for u in users for p in sync.projections(u) if p.key == "email"]

        assert [status for status, _ in emails()] == ["PENDING"] * 3
        t_down = env.clock.real()
        drains = 0
        while not all(status == "FAILED" for status, _ in emails()):
            env.clock.advance(5)
            connects.clear()
            sync.drain()
            assert len(connects) <= 1  # 21 projections of three flows: one try at the store that is down
            drains += 1
            assert drains < 2000, emails()
        waited = env.clock.real() - t_down
        assert GIVE_UP_SECONDS <= waited <= GIVE_UP_SECONDS + 300 and drains > 100  # bounded, backed off
        assert {attempts for _, attempts in emails()} == {GIVE_UP_ATTEMPTS}
        env.clock.advance(3600)
        connects.clear()
        sync.drain()
        assert connects == []  # given up: no more tries
        [row] = [p for p in env.inspect("u2")["state"]["attributeStore"] if p["key"] == "email"]
        assert row["status"] == "FAILED" and "given up after 128 failed attempts" in row["error"]
        assert "cannot connect" in row["error"] or "upsert failed" in row["error"]
        problems, _ = check(env.store)
        assert len(problems) == 21 and all("given up" in p for p in problems)  # doctor names each
        assert select(database, "u1")["email"] == "ada@example.com"  # type: ignore[index]  # not written...

    with DexTestEnv(tmp_path / "dex.db", start=0.0) as env:  # the next process, the server back
        env.engine.use_attribute_stores(entity_store(database))  # opens the stores: due again, written
        for u in users:
            assert select(database, u)["email"] == "ada.byron@example.com"  # type: ignore[index]  # ...nor lost
            assert {p.status for p in env.engine.use_attribute_stores(entity_store(database)).projections(u)} == {
                "SYNCED"}
        assert check(env.store)[0] == []
