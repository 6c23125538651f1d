"""A long-running memory writer on the scripted fakes, as the app or ``pcm mcp`` is one: it opens
a data folder once and keeps its engine (and so its ``MemoryService``'s copy of every memory)
while other processes change memories with ``pcm memory ...``. Commands are JSON lines on
stdin, each answered by one JSON line on stdout:

    {"say": TEXT}      a turn of the user in this process's session; waits for the memory writer
    {"build": TEXT}    the context compiled for TEXT in a new session: {"text": ...}
    {"memories": 1}    every memory as this process sees it: [{fragment_id, content, state...}]

    python -m tests.store.memory_writer DATA_DIR
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from app import main as wiring
from app.config import Settings
from tests.store.fake_pcm import _chat, fake_embedder


def _seen(memory: Any) -> dict[str, Any]:
    return {"fragment_id": memory.fragment_id, "content": memory.content, "type": memory.type,
            "pinned": memory.pinned, "revoked": bool(memory.revoked_at), "valid": memory.valid_to is None}


async def serve(data_dir: str) -> None:
    wiring.load_chat_model = _chat  # type: ignore[assignment]
    wiring.load_embedder = lambda _settings: fake_embedder()  # type: ignore[assignment]
    engine = wiring.build_engine(Settings.load(data_dir), counter="words")
    await engine.start()
    session = (await engine.open_session(None, title="Long-running writer")).session_id
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = json.loads(line)
            if "say" in command:
                await (await engine.submit(session, command["say"])).done
                await engine.memory_idle()
                out: Any = {"ok": True}
            elif "build" in command:
                fresh = await engine.open_session(None, title="Check")
                record, _ = await engine.build(fresh.session_id, command["build"])
                out = {"text": record.context.text()}
            else:
                out = [_seen(m) for _, m in await engine.memories()]
            print(json.dumps(out), flush=True)
    finally:
        await engine.close()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
