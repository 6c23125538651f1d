"""The memory writer's optional model signal: the local model reads a user turn for memories.

Off unless ``EngineConfig.memory_model`` is "auto" (``Settings.memory_model``). For each user turn
the writer reads, the chat model is asked for schema-constrained JSON (``app.core.memory.
model_signal``) as a *background* call (it gives way to any prompt input within one token) and
within ``memory_model_timeout_s``. Whatever happens — output, late, error, gave way — is recorded
in the session's event log (``memory.model``, by evidence id) before it is read, and a later run
on the same evidence reads the record instead of asking again: extraction stays idempotent, and
what the model said is there to replay and audit. Only grounded memories are kept (see the pure
module); the rules' memories are unaffected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from app.core.engine.context import EngineContext
from app.core.memory.model_signal import MEMORY_JSON_SCHEMA, memory_messages, read_model_memories
from app.core.ports import GenerationParams
from app.core.runtime.executors import ChatStream
from app.core.types import MemoryFragment

LOG_TYPE = "memory.model"
TEXT_CHARS = 2000  # the head of a long paste is what the small model can read


class ModelSignal:
    """Asks (or reads the record of) the model's memories for user turns; see the module docstring."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self._records: dict[str, dict[str, dict[str, Any]]] = {}  # session → evidence id → entry

    @property
    def on(self) -> bool:
        return self.ctx.config.memory_model == "auto" and self.ctx.chat is not None

    async def memories(self, session_id: str, pieces: Sequence[tuple[str, str, str, str]]) -> list[MemoryFragment]:
        """The grounded model memories of the user turns among ``pieces`` ((id, text, source, at))."""
        if not self.on:
            return []
        records = await self._recorded(session_id)
        found: list[MemoryFragment] = []
        for eid, text, source, at in pieces:
            if source != "user":
                continue
            entry = records.get(eid)
            if entry is None:
                entry = {"evidence_id": eid, **await self._ask(text)}
                await self.ctx.on_store(self.ctx.store.append_event, session_id, LOG_TYPE, entry)
                records[eid] = entry
            found += read_model_memories(entry.get("output"), text, evidence_id=eid, at=at)[0]
        return found

    async def _recorded(self, session_id: str) -> dict[str, dict[str, Any]]:
        if session_id not in self._records:
            events = await self.ctx.on_store(self.ctx.store.list_events, session_id)
            self._records[session_id] = {e["payload"]["evidence_id"]: e["payload"] for e in events
                                         if e["type"] == LOG_TYPE and "evidence_id" in e["payload"]}
        return self._records[session_id]

    async def _ask(self, text: str) -> dict[str, Any]:
        """One background call within the time limit: {"status", "output"}; never raises."""
        assert self.ctx.chat is not None
        stream = ChatStream(self.ctx.ex, self.ctx.chat, memory_messages(text[:TEXT_CHARS]), stage="memory",
                            params=GenerationParams(max_tokens=200, temperature=0.0),
                            json_schema=MEMORY_JSON_SCHEMA, background=True)
        try:
            result = await asyncio.wait_for(stream.wait(), self.ctx.config.memory_model_timeout_s)
        except asyncio.TimeoutError:
            stream.stop()
            return {"status": "late", "output": None}
        except Exception:  # noqa: BLE001 - the model signal only ever adds; a failure adds nothing
            return {"status": "gave way" if stream.cancel.cancelled else "error", "output": None}
        if result.finish_reason == "cancelled":
            return {"status": "gave way", "output": None}
        return {"status": "ok" if result.parsed is not None else "invalid", "output": result.text,
                "model": result.usage.model}
