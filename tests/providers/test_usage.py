"""Every model call of a turn is recorded in model_usage with its provider, tokens and cost
(intent and tool choice too, not only the answer); migration 0004 moves old rows' values into
the new columns."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from app.config import Settings
from app.core.types import ModelUsage
from app.llm.fakes import ScriptedProvider
from app.llm.providers import LocalProvider, ProviderRegistry, ProviderSettings, Spending
from app.llm.providers.settings import ProviderConfig, local_provider
from app.store.migrations import MIGRATIONS, apply_migrations
from app.store.sqlite import SqliteStore
from tests.conftest import stored

INTENT = '{"mode": "task", "task_type": "planning", "goal": "plan the offsite"}'


def test_intent_and_answer_calls_of_a_turn_are_both_recorded(make_engine: Any) -> None:
    lab = ScriptedProvider("lab", [INTENT, "Sure, here is a plan."], price_in_per_1k=1.0, price_out_per_1k=2.0)
    local = LocalProvider(ScriptedProvider("inner", ["local"]))
    config = ProviderConfig(id="lab", kind="openai", base_url="http://127.0.0.1:9/v1", model="m",
                            price_in_per_1k=1.0, price_out_per_1k=2.0)
    spending = Spending()
    registry = ProviderRegistry([(lab, config), (local, local_provider())], ProviderSettings(), spending=spending)
    engine = make_engine(chat=registry, llm_intent="auto")
    engine._ctx.config.llm_intent_below = 1.01  # always ask for the intent

    async def main() -> tuple[Any, list[ModelUsage]]:
        await engine.start()
        try:
            state = await engine.open_session(None)
            record = await (await engine.submit(state.session_id, "offsite")).done
            return record, await stored(engine, lambda store: store.list_model_usage(state.session_id))
        finally:
            await engine.close()

    record, usages = asyncio.run(main())
    assert record.build.llm_intent["status"] == "ok" and record.output == "Sure, here is a plan."
    assert sorted(u.stage for u in usages) == ["answer", "intent"]
    assert {u.provider for u in usages} == {"lab"} and all(u.turn_id == record.turn_id for u in usages)
    assert all(u.cost > 0 and u.prompt_tokens > 0 for u in usages)
    assert spending.totals("lab")[0] == sum(u.cost for u in usages)


def test_migration_0004_moves_provider_and_status_into_columns(tmp_path: Path) -> None:
    db = Settings(data_dir=tmp_path).db_path
    conn = sqlite3.connect(db, isolation_level=None)
    apply_migrations(conn, [m for m in MIGRATIONS if m[0] < "0004"])
    conn.execute("INSERT INTO sessions (session_id, title, created_at, updated_at) VALUES ('s', '', 'x', 'x')")
    old = {"provider": "llama.cpp", "status": "error", "first_token_latency_ms": 12.5, "params": {}, "error": "boom",
           "total_tokens": 3}
    conn.execute("INSERT INTO model_usage (model_usage_id, session_id, seq, turn_id, task_id, stage, model, "
                 "prompt_tokens, completion_tokens, latency_ms, at, data) VALUES ('u', 's', 1, NULL, NULL, 'answer', "
                 "'m', 2, 1, 40.0, '2026-01-01T00:00:00.000000Z', ?)", (json.dumps(old),))
    conn.close()
    store = SqliteStore(db)
    try:
        [usage] = store.list_model_usage("s")
        assert (usage.provider, usage.status, usage.first_token_latency_ms, usage.error) == ("llama.cpp", "error", 12.5,
                                                                                             "boom")
        assert usage.cost == 0 and usage.off_machine is False
        store.add_model_usage("s", ModelUsage(provider="lab", cost=0.25, off_machine=True,
                                              at="2026-01-02T10:00:00.000000Z"))
        assert store.spending_since("2026-01-02T00:00:00.000000Z") == {"lab": 0.25}
        row = store._db().execute("SELECT provider, status, data FROM model_usage WHERE model_usage_id = 'u'").fetchone()
        assert (row[0], row[1]) == ("llama.cpp", "error") and "provider" not in json.loads(row[2])
    finally:
        store.close()
