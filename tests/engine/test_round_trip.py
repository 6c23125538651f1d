"""Export → import → export gives the same document (issue 32, finding 7): everything an export
holds — messages, turns with their records, memories, topics, evidences, the graph — comes back,
on real SQLite + LanceDB with the scripted chat model (the engine's own turn records: a
``populate``d store has none, see tests/store/helpers.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.core.types import EnvEvent
from tests.conftest import EngineFactory


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ (paths), the first few."""
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} vs {type(b).__name__}"]
    if isinstance(a, dict):
        out = [f"{path}/{k}: only in one" for k in sorted(set(a) ^ set(b))]
        return out + [d for k in sorted(set(a) & set(b)) for d in differences(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, list):
        out = [f"{path}: {len(a)} vs {len(b)} items"] if len(a) != len(b) else []
        return out + [d for n, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{n}]")]
    return [] if a == b else [f"{path}: {str(a)[:80]!r} vs {str(b)[:80]!r}"]


def test_export_import_export_gives_the_same_document_with_turn_records(make_engine: EngineFactory,
                                                                        tmp_path: Path) -> None:
    first = make_engine(["Noted, March 3.", "Orion runs on Kubernetes."])
    second = make_engine(["-"], data_dir=tmp_path / "second")

    async def main() -> None:
        await first.start()
        state = await first.open_session(None, title="Launch «plan»\nweek 2")
        await (await first.submit(state.session_id, "My deadline is March 3. Never deploy Orion on Fridays.")).done
        await first.ingest_env(state.session_id, [EnvEvent(kind="file", source="/notes", uri="/notes/rail.md",
                                                           title="rail.md", content="rail: JR pass 50,000 yen")])
        await (await first.submit(state.session_id, "What about Kubernetes and Orion?")).done
        await first.memory_idle()
        exported = await first.export_session(state.session_id)
        await first.close()
        await second.start()
        try:
            again = await second.export_session(await second.import_session(exported))
        finally:
            await second.close()
        turns = exported["pcm"]["turns"]
        assert len(turns) == 2 and all(t["record"] and t["status"] == "answered" for t in turns)
        assert exported["pcm"]["memory"] and exported["pcm"]["topics"] and exported["evidences"]
        assert differences(exported, again) == []

    asyncio.run(main())
