"""Providers with real parts: llama-cpp-python's OpenAI-compatible server, started on 127.0.0.1
from the small GGUF, answers turns through the engine; a spending limit refuses it; a failure
mid-stream stops the answer clearly; once the server is gone the in-process llama.cpp answers.
Every call is checked in model_usage (provider, tokens, cost). One server start for the module;
the tests run in file order, and the last ones stop the server."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.core.engine.context import EngineConfig
from app.core.ports import ChatProvider, GenerationParams
from app.llm.providers import OpenAICompatibleProvider, build_registry
from app.llm.providers.settings import LOCAL_ID, add_provider, load_providers, set_limits

pytestmark = pytest.mark.model

LAB = {"id": "lab", "kind": "openai", "model": "smol", "json_schema_style": "json_object",
       "price_in_per_1k": 0.5, "price_out_per_1k": 1.0}
CONFIG = EngineConfig(default_budget=300, llm_intent="off", generation=GenerationParams(max_tokens=24))


def _lab(data_dir: Path, base_url: str, **more: Any) -> None:
    add_provider(data_dir, {**LAB, "base_url": base_url, **more}, set_as_default=True)


def _turn(make_engine: Any, registry: Any, text: str, on_token: Any = None) -> tuple[Any, list[dict[str, Any]]]:
    """One turn through an engine whose chat model is ``registry``; its record and the
    model_usage rows of the data folder, read back from SQLite's own columns."""
    engine = make_engine(chat=registry, config=CONFIG)

    async def body(engine: Any) -> Any:
        state = await engine.open_session(None)
        run = await engine.submit(state.session_id, text, on_token=on_token)
        return await run.done

    record = asyncio.run(_run(engine, body))
    with sqlite3.connect(Settings(data_dir=make_engine.tmp_path).db_path) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(r) for r in db.execute("SELECT * FROM model_usage ORDER BY at")]
    return record, rows


async def _run(engine: Any, body: Any) -> Any:
    await engine.start()
    try:
        return await body(engine)
    finally:
        await engine.close()


def test_the_served_model_is_an_available_provider_with_json_output(served: Any, tmp_path: Path) -> None:
    _lab(tmp_path, served.base_url)
    provider = OpenAICompatibleProvider(load_providers(tmp_path).get("lab"))  # type: ignore[arg-type]
    assert isinstance(provider, ChatProvider) and provider.is_available()
    info = provider.model_info()
    assert (info.type, info.off_machine, info.endpoint) == ("external", False, served.base_url)
    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["answer"]}
    result = provider.chat([{"role": "user", "content": "Is the sky blue? Answer in JSON."}],
                           params=GenerationParams(max_tokens=16, temperature=0.0), json_schema=schema, stage="intent")
    assert result.parsed in ({"answer": "yes"}, {"answer": "no"}), result.text
    assert result.usage.provider == "lab" and result.usage.prompt_tokens > 0 and result.usage.cost > 0


def test_a_turn_is_answered_through_the_served_model_and_recorded(served: Any, make_engine: Any,
                                                                 local_model: Any) -> None:
    _lab(make_engine.tmp_path, served.base_url)
    registry = build_registry(make_engine.tmp_path, local_model)
    record, rows = _turn(make_engine, registry, "Say hello to the team in one short sentence.")
    assert record.finish_reason in ("stop", "length") and record.output.strip()
    assert record.usage["provider"] == "lab" and record.usage["off_machine"] is False
    [row] = rows
    assert (row["provider"], row["stage"], row["status"], row["turn_id"]) == ("lab", "answer", "success", record.turn_id)
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["first_token_latency_ms"] > 0
    assert row["cost"] == pytest.approx((row["prompt_tokens"] * 0.5 + row["completion_tokens"] * 1.0) / 1000)


def test_a_spending_limit_refuses_the_served_model_and_the_local_one_answers(served: Any, make_engine: Any,
                                                                            local_model: Any) -> None:
    _lab(make_engine.tmp_path, served.base_url)
    set_limits(make_engine.tmp_path, daily=0.0001)
    registry = build_registry(make_engine.tmp_path, local_model)
    record, rows = _turn(make_engine, registry, "Say hello in one short sentence.")
    assert record.output.strip() and record.usage["provider"] == LOCAL_ID
    assert "daily spending limit of 0.0001 for external providers is reached" in record.usage["notes"][0]
    [row] = rows
    assert (row["provider"], row["cost"], row["off_machine"]) == (LOCAL_ID, 0, 0)


def test_a_failure_mid_stream_stops_the_answer_then_the_local_model_answers(served: Any, make_engine: Any,
                                                                           local_model: Any) -> None:
    _lab(make_engine.tmp_path, served.base_url)
    registry = build_registry(make_engine.tmp_path, local_model)
    seen: list[str] = []

    def kill_on_first_piece(piece: str) -> None:
        seen.append(piece)
        if len(seen) == 1:
            served.stop()  # the server dies while it streams

    broken, _ = _turn(make_engine, registry, "Write a long story about a lighthouse keeper.", kill_on_first_piece)
    assert broken.finish_reason == "error" and broken.output == "".join(seen)
    error = broken.usage["error"]
    assert error.startswith("lab failed mid-answer, the answer stops here") and "next request goes to" in error
    again, rows = _turn(make_engine, registry, "Say hello in one short sentence.")
    assert again.usage["provider"] == LOCAL_ID and again.output.strip()
    assert [(r["provider"], r["status"]) for r in rows] == [("lab", "error"), (LOCAL_ID, "success")]


def test_with_the_server_gone_a_new_run_falls_back_to_the_in_process_model(served: Any, make_engine: Any,
                                                                          local_model: Any) -> None:
    served.stop()
    _lab(make_engine.tmp_path, served.base_url)
    registry = build_registry(make_engine.tmp_path, local_model)
    started = time.perf_counter()
    record, rows = _turn(make_engine, registry, "Say hello in one short sentence.")
    assert record.usage["provider"] == LOCAL_ID and record.output.strip()
    assert record.usage["notes"] == [f"skipped lab: lab is not reachable at {served.base_url}"]
    assert [r["provider"] for r in rows] == [LOCAL_ID]
    print(f"fallback wait {record.usage['params'].get('fallback_wait_ms')} ms; turn {time.perf_counter() - started:.2f} s")
